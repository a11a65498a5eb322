// buri-codec-bench: CBOREncoder/CBORDecoder against Foundation's
// JSONEncoder/JSONDecoder on the same `Person` values, side by side in one
// process. Each repetition runs all four measurements in turn (interleaved,
// so machine noise hits both codecs alike); the table shows medians.
//
//   swift build -c release --package-path Benchmarks --scratch-path Benchmarks/.build-codec
//   Benchmarks/.build-codec/release/buri-codec-bench [--count N] [--repetitions R] [--check]
//
// --check exits with status 1 if CBOR is not at least 3x faster than JSON at
// both encoding and decoding (the format issue's requirement).

import BuriCodec
import Foundation

struct Person: Codable, Equatable {
    var objectId: String
    var name: String
    var locale: String
    var age: Int
}

struct Options {
    var count = 100_000
    var repetitions = 7
    var check = false

    init(arguments: [String]) {
        var iterator = arguments.dropFirst().makeIterator()
        while let argument = iterator.next() {
            switch argument {
            case "--count": count = iterator.next().flatMap { Int($0) } ?? count
            case "--repetitions": repetitions = iterator.next().flatMap { Int($0) } ?? repetitions
            case "--check": check = true
            default:
                print("usage: buri-codec-bench [--count N] [--repetitions R] [--check]")
                exit(2)
            }
        }
    }
}

/// A UUID string that depends only on `i`, so runs are repeatable.
func objectId(_ i: Int) -> String {
    var bytes = [UInt8](repeating: 0, count: 16)
    var x = UInt64(i) &* 0x9E37_79B9_7F4A_7C15 &+ 0x1234_5678
    for k in 0..<16 {
        x ^= x >> 29
        x = x &* 0xBF58_476D_1CE4_E5B9
        bytes[k] = UInt8(truncatingIfNeeded: x >> 24)
    }
    let uuid = UUID(
        uuid: (
            bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
            bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]
        ))
    return uuid.uuidString
}

/// Seconds taken by `body`.
func time(_ body: () throws -> Void) rethrows -> Double {
    let clock = ContinuousClock()
    let start = clock.now
    try body()
    let elapsed = clock.now - start
    let (seconds, attoseconds) = elapsed.components
    return Double(seconds) + Double(attoseconds) * 1e-18
}

func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    guard !sorted.isEmpty else { return 0 }
    let mid = sorted.count / 2
    return sorted.count % 2 == 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
}

func formatted(_ value: Double, decimals: Int = 0) -> String {
    let scale = pow(10.0, Double(decimals))
    let rounded = (value * scale).rounded() / scale
    if decimals == 0 {
        // Thousands separators for readability.
        let digits = String(Int(rounded))
        var out = ""
        for (i, c) in digits.reversed().enumerated() {
            if i > 0 && i % 3 == 0 { out.append(",") }
            out.append(c)
        }
        return String(out.reversed())
    }
    return String(rounded)
}

let options = Options(arguments: CommandLine.arguments)
let people = (0..<options.count).map { i in
    Person(objectId: objectId(i), name: "Dirk", locale: "EN", age: 20 + i % 20)
}

let jsonEncoder = JSONEncoder()
let jsonDecoder = JSONDecoder()
let cborEncoder = CBOREncoder()
let cborDecoder = CBORDecoder()

// Pre-encoded inputs for the decoders, and a correctness check of both.
let jsonPayloads = try people.map { try jsonEncoder.encode($0) }
let cborPayloads = try people.map { try cborEncoder.encode($0) }
for i in [0, options.count / 2, options.count - 1] where i >= 0 && i < options.count {
    let fromJSON = try jsonDecoder.decode(Person.self, from: jsonPayloads[i])
    let fromCBOR = try cborDecoder.decode(Person.self, from: cborPayloads[i])
    guard fromJSON == people[i], fromCBOR == people[i] else {
        print("round trip failed for person \(i)")
        exit(1)
    }
}

var samples: [String: [Double]] = [:]
var sink = 0  // keeps the optimiser from dropping work

// One untimed warm-up pass, then the measured repetitions.
for repetition in 0...options.repetitions {
    let measured = repetition > 0
    let jsonEncode = try time {
        for person in people { sink &+= try jsonEncoder.encode(person).count }
    }
    let cborEncode = try time {
        for person in people { sink &+= try cborEncoder.encode(person).count }
    }
    let jsonDecode = try time {
        for payload in jsonPayloads { sink &+= try jsonDecoder.decode(Person.self, from: payload).age }
    }
    let cborDecode = try time {
        for payload in cborPayloads { sink &+= try cborDecoder.decode(Person.self, from: payload).age }
    }
    if measured {
        samples["json encode", default: []].append(jsonEncode)
        samples["cbor encode", default: []].append(cborEncode)
        samples["json decode", default: []].append(jsonDecode)
        samples["cbor decode", default: []].append(cborDecode)
    }
}

let medians = samples.mapValues(median)
func opsPerSecond(_ name: String) -> Double {
    Double(options.count) / (medians[name] ?? .infinity)
}

let jsonEncodeOps = opsPerSecond("json encode")
let cborEncodeOps = opsPerSecond("cbor encode")
let jsonDecodeOps = opsPerSecond("json decode")
let cborDecodeOps = opsPerSecond("cbor decode")
let encodeRatio = cborEncodeOps / jsonEncodeOps
let decodeRatio = cborDecodeOps / jsonDecodeOps

print("Person × \(formatted(Double(options.count))), median of \(options.repetitions) interleaved repetitions")
print("payload: JSON \(jsonPayloads[0].count) bytes, CBOR \(cborPayloads[0].count) bytes")
print("")
print("| codec | encode ops/s | decode ops/s |")
print("|---|---:|---:|")
print("| Foundation JSONEncoder/JSONDecoder | \(formatted(jsonEncodeOps)) | \(formatted(jsonDecodeOps)) |")
print("| BuriCodec CBOREncoder/CBORDecoder | \(formatted(cborEncodeOps)) | \(formatted(cborDecodeOps)) |")
print("| CBOR / JSON | \(formatted(encodeRatio, decimals: 2))x | \(formatted(decodeRatio, decimals: 2))x |")
if sink == 42 { print("") }  // use the sink

if options.check {
    guard encodeRatio >= 3, decodeRatio >= 3 else {
        print("FAIL: CBOR must be at least 3x faster than JSON at both encoding and decoding")
        exit(1)
    }
    print("OK: both ratios are at least 3x")
}
