import Foundation

/// The names (relative to `directory`) of the files under `directory`, recursively, whose bytes
/// hold `needle` anywhere: how the encryption tests prove a secret reached no file (LevelDB's
/// tables, log, MANIFEST and LOG; a backup; an etcd member's data).
public func filesHolding(_ needle: [UInt8], under directory: String) -> [String] {
    var found: [String] = []
    guard let walker = FileManager.default.enumerator(atPath: directory) else { return found }
    for case let name as String in walker {
        let path = (directory as NSString).appendingPathComponent(name)
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue,
            let data = FileManager.default.contents(atPath: path)
        else { continue }
        if contains(data, needle) { found.append(name) }
    }
    return found
}

/// Whether `data` holds `needle`, through Foundation's own search (compiled optimized): the test
/// builds are not, and a generic search of an etcd cluster's hundreds of megabytes took most of a
/// minute.
private func contains(_ data: Data, _ needle: [UInt8]) -> Bool {
    needle.isEmpty || data.range(of: Data(needle)) != nil
}
