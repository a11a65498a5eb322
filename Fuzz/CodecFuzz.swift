// libFuzzer harness for Buri's record decoder: the CBOR payload of every stored object.
// Built and run by Scripts/fuzz; see Fuzz/README.md.
//
// Properties checked on every input (a violation traps, which libFuzzer reports as a crash):
//  - CBORDecoder decoding into Codable types and CBORValue(decoding:) never crash, whatever the bytes;
//  - a CBORValue that decodes re-encodes to bytes that decode again to the same encoding;
//  - a FuzzPerson that decodes re-encodes to bytes that decode to an equal value.
import BuriCodec
import Foundation

struct FuzzAddress: Codable, Equatable {
    var street: String
    var zip: Int?
}

enum FuzzKind: String, Codable {
    case person, robot
}

/// Shaped like the objects apps store: strings, numbers of several widths, optionals, arrays,
/// nested structs, enums, bytes, dictionaries.
struct FuzzPerson: Codable, Equatable {
    var id: String
    var name: String
    var locale: String
    var age: Int
    var score: Double?
    var small: Int8?
    var big: UInt64?
    var ratio: Float?
    var flag: Bool?
    var tags: [String]
    var address: FuzzAddress?
    var kind: FuzzKind?
    var blob: [UInt8]?
    var extra: [String: Int]?
}

@inline(never)
func require(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition {
        fatalError("property violated: \(message())")
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzCodec(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = UnsafeRawBufferPointer(start: data, count: size)

    if let value = try? CBORValue(decoding: bytes) {
        let encoded = value.encoded()
        _ = value.jsonString(pretty: false)
        do {
            let again = try CBORValue(decoding: encoded)
            require(again.encoded() == encoded, "CBORValue re-encoding is not stable")
        } catch {
            require(false, "a re-encoded CBORValue does not decode: \(error)")
        }
    }

    let decoder = CBORDecoder()
    if let person = try? decoder.decode(FuzzPerson.self, from: bytes) {
        do {
            let encoded = try CBOREncoder().encode(person)
            let again = try decoder.decode(FuzzPerson.self, from: encoded)
            // Compared as values: a dictionary's encoding follows its (unspecified) iteration order.
            let hasNaN = person.score?.isNaN == true || person.ratio?.isNaN == true
            require(hasNaN || again == person, "FuzzPerson round trip changed the value: \(person) became \(again)")
        } catch {
            require(false, "a re-encoded FuzzPerson does not decode: \(error)")
        }
    }
    _ = try? decoder.decode([FuzzPerson].self, from: bytes)
    _ = try? decoder.decode([String: [Double]].self, from: bytes)
    _ = try? decoder.decode([Int64?].self, from: bytes)
    return 0
}

/// With BURI_FUZZ_SEEDS=<dir> in the environment, writes a starting corpus of valid encodings
/// to <dir> and exits (Scripts/fuzz does this before each run).
@_cdecl("LLVMFuzzerInitialize")
public func initializeCodec(
    _ argc: UnsafeMutablePointer<CInt>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>
) -> CInt {
    guard let directory = ProcessInfo.processInfo.environment["BURI_FUZZ_SEEDS"] else { return 0 }
    let people = [
        FuzzPerson(id: "p1", name: "Dirk", locale: "EN", age: 20, tags: []),
        FuzzPerson(
            id: "p2", name: "Ünïcødé \u{1F600}", locale: "DE", age: -7, score: 1.5, small: -3, big: .max, ratio: 0.25,
            flag: true,
            tags: ["a", "", "b\u{0}c"], address: FuzzAddress(street: "Main", zip: 12345), kind: .robot,
            blob: [0, 255, 1],
            extra: ["x": 1, "y": -1]),
        FuzzPerson(
            id: "", name: "", locale: "", age: .min, score: -.infinity, tags: ["z"],
            address: FuzzAddress(street: "", zip: nil)),
    ]
    var seeds: [[UInt8]] = []
    for person in people { if let bytes = try? CBOREncoder().encode(person) { seeds.append(bytes) } }
    if let bytes = try? CBOREncoder().encode(people) { seeds.append(bytes) }
    if let bytes = try? CBOREncoder().encode(["a": [1.5, -0.0, .nan], "b": []] as [String: [Double]]) {
        seeds.append(bytes)
    }
    let value: CBORValue = [
        "k": [1, -2, 3.5, "text", nil, true], "m": ["nested": .tagged(1, 1_700_000_000)], "b": .bytes([1, 2]),
        "s": .simple(99),
    ]
    seeds.append(value.encoded())
    seeds.append([0x9F, 0x01, 0x5F, 0x41, 0x00, 0xFF, 0xFF])  // indefinite array holding an indefinite byte string
    seeds.append([0xBF, 0x61, 0x61, 0xF9, 0x3C, 0x00, 0xFF])  // indefinite map with a half float
    seeds.append([0xFB, 0x7F, 0xF8, 0, 0, 0, 0, 0, 0])  // a double NaN
    try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    for (number, seed) in seeds.enumerated() {
        _ = FileManager.default.createFile(atPath: directory + "/seed-\(number)", contents: Data(seed))
    }
    exit(0)
}
