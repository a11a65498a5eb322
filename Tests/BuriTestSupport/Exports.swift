// The dependency-free helpers (the seeded generator, temporary directories) come with this module,
// so that a test target depending on BuriTestSupport has them without a second import.
@_exported import BuriTestBasics
