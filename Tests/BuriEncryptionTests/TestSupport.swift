import Buri
import BuriEncryption
import Foundation

/// A cheap scrypt cost (1 MiB), so that passphrase tests stay fast; not for real databases.
let quickCost = ScryptCost(logN: 10, r: 8, p: 1)

/// The bytes of a hex string (two digits a byte, no separators).
func bytes(hex: String) -> [UInt8] {
    var result: [UInt8] = []
    var index = hex.startIndex
    while index < hex.endIndex {
        let next = hex.index(index, offsetBy: 2)
        result.append(UInt8(hex[index..<next], radix: 16)!)
        index = next
    }
    return result
}

/// Lower-case hex of `bytes`.
func hex(_ bytes: some Sequence<UInt8>) -> String {
    let digits = Array("0123456789abcdef")
    return String(bytes.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 0x0F)]] })
}

/// 16 bytes counting up from `first`: the fixed salts and session id of the vectors.
func sixteen(from first: UInt8) -> [UInt8] { (0..<16).map { first + $0 } }

extension DatabaseCipher {
    /// ``seal(_:associatedData:)`` of arrays.
    func seal(_ plaintext: [UInt8], _ associatedData: [UInt8] = []) -> [UInt8] {
        plaintext.withUnsafeBytes { plaintext in
            associatedData.withUnsafeBytes { seal(plaintext, associatedData: $0) }
        }
    }

    /// ``seal(_:associatedData:padding:)`` of arrays.
    func seal(_ plaintext: [UInt8], _ associatedData: [UInt8], padding: Int) -> [UInt8] {
        plaintext.withUnsafeBytes { plaintext in
            associatedData.withUnsafeBytes { seal(plaintext, associatedData: $0, padding: padding) }
        }
    }

    /// ``open(_:associatedData:)`` of arrays.
    func open(_ sealed: [UInt8], _ associatedData: [UInt8] = []) throws(EncryptionFailure) -> [UInt8] {
        let result = sealed.withUnsafeBytes { sealed in
            associatedData.withUnsafeBytes { associatedData in
                Result { () throws(EncryptionFailure) in try open(sealed, associatedData: associatedData) }
            }
        }
        return try result.get()
    }

    /// ``token(_:)`` of an array.
    func token(_ bytes: [UInt8]) -> [UInt8] { bytes.withUnsafeBytes { token($0) } }
}

/// The kinds of ``EncryptionFailure``, to compare without the message.
enum FailureKind: Equatable {
    case wrongKey, malformedHeader, authenticationFailed, invalidKey
}

extension EncryptionFailure {
    var kind: FailureKind {
        switch self {
        case .wrongKey: return .wrongKey
        case .malformedHeader: return .malformedHeader
        case .authenticationFailed: return .authenticationFailed
        case .invalidKey: return .invalidKey
        }
    }
}

/// The failure `body` throws, or nil when it succeeds.
func failure<R>(_ body: () throws(EncryptionFailure) -> R) -> EncryptionFailure? {
    do {
        _ = try body()
        return nil
    } catch {
        return error
    }
}

/// Writes `contents` to `path`.
func write(_ contents: [UInt8], to path: String) throws {
    try Data(contents).write(to: URL(fileURLWithPath: path))
}

/// The session id and counter of a sealed value: its nonce, unique per key.
func nonce(of sealed: [UInt8]) -> [UInt8] { Array(sealed[1..<25]) }
/// The session id of a sealed value.
func sessionID(of sealed: [UInt8]) -> [UInt8] { Array(sealed[1..<17]) }
/// The counter of a sealed value.
func counter(of sealed: [UInt8]) -> UInt64 { sealed[17..<25].reduce(0) { $0 << 8 | UInt64($1) } }
