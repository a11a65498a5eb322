import BuriCodec
// The seeded generator (SplitMix64) shared by every test target.
@_exported import BuriTestBasics
import Foundation
import Testing

/// Encodes and decodes `value` with the CBOR codec.
func roundTrip<T: Codable>(_ value: T) throws -> T {
    let bytes = try CBOREncoder().encode(value)
    return try CBORDecoder().decode(T.self, from: bytes)
}

/// Expects `body` to throw a `CBORError` and returns it.
@discardableResult
func expectCBORError(
    _ kind: CBORError.Kind? = nil, sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> Void
) -> CBORError? {
    do {
        try body()
        Issue.record(
            "expected a CBORError\(kind.map { " of kind \($0)" } ?? ""), but nothing was thrown",
            sourceLocation: sourceLocation)
        return nil
    } catch let error as CBORError {
        if let kind {
            #expect(error.kind == kind, "\(error)", sourceLocation: sourceLocation)
        }
        return error
    } catch {
        Issue.record("expected a CBORError, got \(error)", sourceLocation: sourceLocation)
        return nil
    }
}

/// Parses hex like "a2 61 61 01" into bytes.
func hex(_ text: String) -> [UInt8] {
    let digits = text.filter { !$0.isWhitespace }
    var bytes: [UInt8] = []
    var index = digits.startIndex
    while index < digits.endIndex {
        let next = digits.index(index, offsetBy: 2)
        bytes.append(UInt8(digits[index..<next], radix: 16)!)
        index = next
    }
    return bytes
}

func hexString(_ bytes: [UInt8]) -> String {
    bytes.map { String(format: "%02x", $0) }.joined()
}

// MARK: - Model types shared by the tests

struct Address: Codable, Equatable {
    var street: String
    var zip: String
    var city: String?
}

/// A plain `Codable` person with a nested address and a dictionary, for the codec alone (this
/// target does not link Buri, so no `BuriSupport` fixture can be shared with it).
struct Person: Codable, Equatable {
    var name: String
    var age: Int
    var address: Address
    var tags: [String]
    var scores: [String: Double]
}

let samplePerson = Person(
    name: "Ada Lovelace", age: 36,
    address: Address(street: "12 St James's Square", zip: "SW1Y 4JH", city: "London"),
    tags: ["math", "poetry", ""], scores: ["analysis": 9.5, "engines": 10])

indirect enum Shape: Codable, Equatable {
    case point
    case circle(radius: Double)
    case rectangle(Double, Double)
    case labeled(name: String, Shape?)
}

enum Color: String, Codable, CaseIterable {
    case red, green, blue
}

enum Level: Int, Codable {
    case low = 1
    case high = 10
}

struct AllIntegers: Codable, Equatable {
    var int: Int
    var int8: Int8
    var int16: Int16
    var int32: Int32
    var int64: Int64
    var uint: UInt
    var uint8: UInt8
    var uint16: UInt16
    var uint32: UInt32
    var uint64: UInt64

    static let min = AllIntegers(
        int: .min, int8: .min, int16: .min, int32: .min, int64: .min,
        uint: .min, uint8: .min, uint16: .min, uint32: .min, uint64: .min)
    static let max = AllIntegers(
        int: .max, int8: .max, int16: .max, int32: .max, int64: .max,
        uint: .max, uint8: .max, uint16: .max, uint32: .max, uint64: .max)
}

/// A linked list whose depth is chosen by the test.
final class Node: Codable {
    var value: Int
    var next: Node?

    init(value: Int, next: Node?) {
        self.value = value
        self.next = next
    }

    static func chain(_ length: Int) -> Node {
        var node = Node(value: 0, next: nil)
        for i in 1..<max(length, 1) { node = Node(value: i, next: node) }
        return node
    }

    var length: Int {
        var count = 1
        var current = self
        while let next = current.next {
            count += 1
            current = next
        }
        return count
    }
}
