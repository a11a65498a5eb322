import Foundation

/// A fresh directory under the system temporary directory, removed (with everything in it) when
/// the value is dropped.
///
/// ```swift
/// let directory = TemporaryDirectory("leveldb-tests")
/// let db = try Database(path: directory.path("db"), options: options)
/// ```
public final class TemporaryDirectory {
    public let url: URL
    public var path: String { url.path }

    /// A directory named `<label>-<UUID>`.
    public init(_ label: String = "buri-tests") {
        url = FileManager.default.temporaryDirectory.appendingPathComponent(
            "\(label)-\(UUID().uuidString)", isDirectory: true)
        try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    /// The path of `name` inside the directory.
    public func path(_ name: String) -> String { url.appendingPathComponent(name).path }

    deinit {
        // Tests may leave directories read-only; make them removable again.
        chmod(path, 0o755)
        if let items = try? FileManager.default.subpathsOfDirectory(atPath: path) {
            for item in items { chmod(path(item), 0o755) }
        }
        try? FileManager.default.removeItem(at: url)
    }
}
