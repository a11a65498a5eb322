import Foundation
import LevelDB

/// A fresh directory under the system temporary directory, removed when the value is dropped.
final class TemporaryDirectory {
    let url: URL
    var path: String { url.path }

    init() {
        url = FileManager.default.temporaryDirectory
            .appendingPathComponent("leveldb-tests-\(UUID().uuidString)", isDirectory: true)
        try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    func path(_ name: String) -> String { url.appendingPathComponent(name).path }

    deinit { try? FileManager.default.removeItem(at: url) }
}

func bytes(_ string: String) -> [UInt8] { Array(string.utf8) }
