import BuriCodec
import Foundation
import Testing

@Suite("Codable values survive an encode/decode round trip")
struct CodableRoundTripTests {
    @Test func nestedStructs() throws {
        #expect(try roundTrip(samplePerson) == samplePerson)
    }

    @Test func enumsWithAndWithoutAssociatedValues() throws {
        let shapes: [Shape] = [
            .point, .circle(radius: 2.5), .rectangle(3, -4),
            .labeled(name: "nested", .labeled(name: "inner", .circle(radius: 1))), .labeled(name: "none", nil),
        ]
        #expect(try roundTrip(shapes) == shapes)
        #expect(try roundTrip(Color.allCases) == Color.allCases)
        #expect(try roundTrip([Level.low, .high]) == [.low, .high])
    }

    @Test func optionalsPresentAbsentAndNested() throws {
        struct Optionals: Codable, Equatable {
            var present: Int?
            var absent: String?
            var nestedSome: Int??
            var nestedNone: Int??
            var elements: [Int?]
        }
        let value = Optionals(
            present: 5, absent: nil, nestedSome: .some(.some(7)), nestedNone: .none, elements: [1, nil, 3])
        #expect(try roundTrip(value) == value)
        // Like JSON, an explicit `.some(nil)` reads back as nil.
        let inner = Optionals(present: nil, absent: nil, nestedSome: .some(nil), nestedNone: nil, elements: [])
        #expect(try roundTrip(inner).nestedSome == .none)
        #expect(try roundTrip(Int?.none) == nil)
        #expect(try roundTrip(Int?.some(3)) == 3)
    }

    @Test func arraysSetsAndDictionaries() throws {
        #expect(try roundTrip([[1, 2], [], [3]]) == [[1, 2], [], [3]])
        #expect(try roundTrip(Set(["a", "b", "c"])) == Set(["a", "b", "c"]))
        #expect(try roundTrip(["b": 2, "a": 1]) == ["b": 2, "a": 1])
        #expect(try roundTrip([7: "seven", -1: "minus one"]) == [7: "seven", -1: "minus one"])
        let uuidKeys = [UUID(): 1, UUID(): 2]
        #expect(try roundTrip(uuidKeys) == uuidKeys)
        #expect(try roundTrip([String: [Int]]()) == [:])
    }

    @Test func foundationTypes() throws {
        struct Foundationy: Codable, Equatable {
            var date: Date
            var id: UUID
            var amount: Decimal
            var link: URL
            var blob: Data
        }
        let value = Foundationy(
            date: Date(timeIntervalSinceReferenceDate: 712_345_678.125), id: UUID(),
            amount: Decimal(string: "-1234567.891011")!, link: URL(string: "https://example.com/a?b=c#d")!,
            blob: Data([0, 1, 2, 255]))
        #expect(try roundTrip(value) == value)
        #expect(try roundTrip(Date.distantPast) == Date.distantPast)
        #expect(try roundTrip(Decimal.greatestFiniteMagnitude) == Decimal.greatestFiniteMagnitude)
    }

    @Test func dataEmptyAndOneMebibyte() throws {
        #expect(try roundTrip(Data()) == Data())
        var generator = SeededGenerator(seed: 1)
        let big = Data((0..<(1 << 20)).map { _ in UInt8.random(in: 0...255, using: &generator) })
        let bytes = try CBOREncoder().encode(big)
        #expect(bytes.count == (1 << 20) + 5)  // 0x5a + 4-byte length
        #expect(try CBORDecoder().decode(Data.self, from: bytes) == big)
    }

    @Test func everyIntegerWidthAtItsLimits() throws {
        #expect(try roundTrip(AllIntegers.min) == AllIntegers.min)
        #expect(try roundTrip(AllIntegers.max) == AllIntegers.max)
        let zero = AllIntegers(
            int: 0, int8: 0, int16: 0, int32: 0, int64: 0, uint: 0, uint8: 0, uint16: 0, uint32: 0, uint64: 0)
        #expect(try roundTrip(zero) == zero)
        for value: Int64 in [-1, -24, -25, -256, -257, -65536, -65537, 23, 24, 255, 256, 65535, 65536, 1 << 32] {
            #expect(try roundTrip(value) == value)
        }
    }

    @Test func floatAndDoubleExtremesKeepTheirBits() throws {
        let doubles: [Double] = [
            .nan, .infinity, -.infinity, -0.0, 0, .leastNonzeroMagnitude, -.leastNonzeroMagnitude,
            .leastNormalMagnitude, .greatestFiniteMagnitude, -.greatestFiniteMagnitude, .pi, 0.1,
        ]
        let decodedDoubles = try roundTrip(doubles)
        #expect(decodedDoubles.map(\.bitPattern) == doubles.map(\.bitPattern))
        let floats: [Float] = [
            .nan, .infinity, -.infinity, -0.0, .leastNonzeroMagnitude, .greatestFiniteMagnitude, 0.1, 16_777_216,
            Float(bitPattern: 0x0000_1234),
        ]
        let decodedFloats = try roundTrip(floats)
        #expect(decodedFloats.map(\.bitPattern) == floats.map(\.bitPattern))
    }

    @Test func stringsEmptyUnicodeAndNUL() throws {
        let strings = [
            "", "plain", "zero\u{0}byte", "日本語", "emoji 👩‍👩‍👧‍👦", "e\u{301}", String(repeating: "x", count: 70_000),
        ]
        #expect(try roundTrip(strings) == strings)
    }

    @Test func bigContainersGetLongHeads() throws {
        for count in [23, 24, 255, 256, 65535, 65536] {
            let array = Array(0..<count)
            let bytes = try CBOREncoder().encode(array)
            #expect(try CBORDecoder().decode([Int].self, from: bytes) == array)
            let dictionary = Dictionary(uniqueKeysWithValues: (0..<count).map { ("k\($0)", $0) })
            #expect(try roundTrip(dictionary) == dictionary)
        }
        // Nested big containers, each patched independently.
        let nested = [Array(repeating: 1, count: 300), Array(repeating: 2, count: 70_000), [3]]
        #expect(try roundTrip(nested) == nested)
    }

    @Test func classHierarchyWithSuperEncoder() throws {
        let dog = Dog(name: "Rex", legs: 4, breed: "Collie", tricks: ["sit"])
        let decoded = try roundTrip(dog)
        #expect(decoded.name == "Rex" && decoded.legs == 4 && decoded.breed == "Collie" && decoded.tricks == ["sit"])
        let value = try CBORValue(decoding: try CBOREncoder().encode(dog))
        #expect(value["super"]?["name"] == "Rex")
        #expect(value["breed"] == "Collie")
    }

    @Test func superEncoderUsedAfterLaterKeys() throws {
        // The super encoder's value is written where superEncoder() was
        // called, even though keys were encoded before it was used.
        let cat = Cat(name: "Tom", legs: 4, lives: 9)
        let decoded = try roundTrip(cat)
        #expect(decoded.name == "Tom" && decoded.lives == 9)
        let value = try CBORValue(decoding: try CBOREncoder().encode(cat))
        #expect(value.mapEntries?.map(\.key) == ["super", "lives", "after"])
    }

    @Test func subclassSharingTheEncoderWithItsSuperclass() throws {
        let bird = Bird(name: "Tweety", legs: 2, canFly: true)
        let value = try CBORValue(decoding: try CBOREncoder().encode(bird))
        #expect(value.mapEntries?.count == 3)
        let decoded = try roundTrip(bird)
        #expect(decoded.name == "Tweety" && decoded.canFly)
    }

    @Test func unkeyedSuperEncoderKeepsItsPosition() throws {
        let value = UnkeyedSuper(values: [1, 2])
        let cbor = try CBORValue(decoding: try CBOREncoder().encode(value))
        #expect(cbor == [1, ["nested": true], 2])
        #expect(try roundTrip(value).values == [1, 2])
    }

    @Test func userInfoReachesTheCodableTypes() throws {
        struct Probe: Codable {
            var seen: String
            init(seen: String) { self.seen = seen }
            init(from decoder: any Decoder) throws {
                seen = decoder.userInfo[CodingUserInfoKey(rawValue: "k")!] as? String ?? "none"
            }
            func encode(to encoder: any Encoder) throws {
                var container = encoder.singleValueContainer()
                try container.encode(encoder.userInfo[CodingUserInfoKey(rawValue: "k")!] as? String ?? "none")
            }
        }
        var encoder = CBOREncoder()
        encoder.userInfo[CodingUserInfoKey(rawValue: "k")!] = "enc"
        var decoder = CBORDecoder()
        decoder.userInfo[CodingUserInfoKey(rawValue: "k")!] = "dec"
        let bytes = try encoder.encode(Probe(seen: ""))
        #expect(try CBORValue(decoding: bytes) == "enc")
        #expect(try decoder.decode(Probe.self, from: bytes).seen == "dec")
    }

    @Test func appendingToKeepsWhatTheBufferHeld() throws {
        var buffer: [UInt8] = [0xAA, 0xBB]
        try CBOREncoder().encode(samplePerson, appendingTo: &buffer)
        #expect(Array(buffer.prefix(2)) == [0xAA, 0xBB])
        #expect(Array(buffer.dropFirst(2)) == (try CBOREncoder().encode(samplePerson)))
        let decoded = try buffer.withUnsafeBytes { raw in
            try CBORDecoder().decode(Person.self, from: UnsafeRawBufferPointer(rebasing: raw[2...]))
        }
        #expect(decoded == samplePerson)
    }

    @Test func keysDecodedOutOfOrderOrMissing() throws {
        struct Wide: Codable { var a = 1, b = "two", c = 3.0, d = [4], e: Int? = 5 }
        struct Reversed: Decodable, Equatable {
            var e: Int?, d: [Int], c: Double, b: String, a: Int, missing: String?
            enum CodingKeys: String, CodingKey { case e, d, c, b, a, missing }
            init(from decoder: any Decoder) throws {
                let container = try decoder.container(keyedBy: CodingKeys.self)
                #expect(container.allKeys.map(\.stringValue) == ["a", "b", "c", "d", "e"])
                #expect(container.contains(.c) && !container.contains(.missing))
                #expect(try container.decodeNil(forKey: .a) == false)
                e = try container.decodeIfPresent(Int.self, forKey: .e)
                d = try container.decode([Int].self, forKey: .d)
                c = try container.decode(Double.self, forKey: .c)
                b = try container.decode(String.self, forKey: .b)
                a = try container.decode(Int.self, forKey: .a)
                missing = try container.decodeIfPresent(String.self, forKey: .missing)
                // Asking again works too.
                #expect(try container.decode(Int.self, forKey: .a) == 1)
            }
        }
        let decoded = try CBORDecoder().decode(Reversed.self, from: try CBOREncoder().encode(Wide()))
        #expect(decoded.a == 1 && decoded.b == "two" && decoded.c == 3 && decoded.d == [4] && decoded.e == 5)
        #expect(decoded.missing == nil)
    }

    @Test func nestedContainersByHand() throws {
        let value = HandWritten(x: 1, y: [2, 3], z: "four")
        #expect(try roundTrip(value) == value)
        #expect(
            try CBORValue(decoding: try CBOREncoder().encode(value)) == ["point": ["x": 1, "y": [2, 3]], "z": "four"])
    }
}

// MARK: - Types with hand-written Codable

class Animal: Codable {
    var name: String
    var legs: Int
    init(name: String, legs: Int) {
        self.name = name
        self.legs = legs
    }
}

final class Dog: Animal {
    var breed: String
    var tricks: [String]
    enum CodingKeys: String, CodingKey { case breed, tricks }

    init(name: String, legs: Int, breed: String, tricks: [String]) {
        self.breed = breed
        self.tricks = tricks
        super.init(name: name, legs: legs)
    }

    required init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        breed = try container.decode(String.self, forKey: .breed)
        tricks = try container.decode([String].self, forKey: .tricks)
        try super.init(from: container.superDecoder())
    }

    override func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(breed, forKey: .breed)
        try container.encode(tricks, forKey: .tricks)
        try super.encode(to: container.superEncoder())
    }
}

final class Cat: Animal {
    var lives: Int
    enum CodingKeys: String, CodingKey { case lives, after }

    init(name: String, legs: Int, lives: Int) {
        self.lives = lives
        super.init(name: name, legs: legs)
    }

    required init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        lives = try container.decode(Int.self, forKey: .lives)
        try super.init(from: container.superDecoder())
    }

    override func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        let superEncoder = container.superEncoder()
        try container.encode(lives, forKey: .lives)
        try super.encode(to: superEncoder)
        try container.encode(true, forKey: .after)
    }
}

final class Bird: Animal {
    var canFly: Bool
    enum CodingKeys: String, CodingKey { case canFly }

    init(name: String, legs: Int, canFly: Bool) {
        self.canFly = canFly
        super.init(name: name, legs: legs)
    }

    required init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        canFly = try container.decode(Bool.self, forKey: .canFly)
        try super.init(from: decoder)
    }

    override func encode(to encoder: any Encoder) throws {
        try super.encode(to: encoder)
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(canFly, forKey: .canFly)
    }
}

struct UnkeyedSuper: Codable {
    var values: [Int]
    struct Marker: Codable { var nested = true }

    init(values: [Int]) { self.values = values }

    init(from decoder: any Decoder) throws {
        var container = try decoder.unkeyedContainer()
        let first = try container.decode(Int.self)
        _ = try Marker(from: container.superDecoder())
        values = [first, try container.decode(Int.self)]
        #expect(container.isAtEnd)
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.unkeyedContainer()
        try container.encode(values[0])
        let superEncoder = container.superEncoder()
        try container.encode(values[1])
        try Marker().encode(to: superEncoder)
    }
}

struct HandWritten: Codable, Equatable {
    var x: Int
    var y: [Int]
    var z: String
    enum Outer: String, CodingKey { case point, z }
    enum Inner: String, CodingKey { case x, y }

    init(x: Int, y: [Int], z: String) {
        self.x = x
        self.y = y
        self.z = z
    }

    init(from decoder: any Decoder) throws {
        let outer = try decoder.container(keyedBy: Outer.self)
        let point = try outer.nestedContainer(keyedBy: Inner.self, forKey: .point)
        x = try point.decode(Int.self, forKey: .x)
        var list = try point.nestedUnkeyedContainer(forKey: .y)
        var y: [Int] = []
        while !list.isAtEnd { y.append(try list.decode(Int.self)) }
        self.y = y
        z = try outer.decode(String.self, forKey: .z)
    }

    func encode(to encoder: any Encoder) throws {
        var outer = encoder.container(keyedBy: Outer.self)
        var point = outer.nestedContainer(keyedBy: Inner.self, forKey: .point)
        try point.encode(x, forKey: .x)
        var list = point.nestedUnkeyedContainer(forKey: .y)
        for value in y { try list.encode(value) }
        try outer.encode(z, forKey: .z)
    }
}
