// The seeded generator and the temporary directory are shared by every test target.
@_exported import BuriTestBasics
import Foundation
import LevelDB

func bytes(_ string: String) -> [UInt8] { Array(string.utf8) }
