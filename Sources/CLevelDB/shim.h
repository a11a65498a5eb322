// The LevelDB C API, as shipped by Debian's libleveldb-dev (and Homebrew's leveldb).
// This module holds no logic; the Swift module `LevelDB` wraps it.
#include <leveldb/c.h>
