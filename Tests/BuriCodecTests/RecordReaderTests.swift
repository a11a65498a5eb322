import BuriCodec
import Foundation
import Testing

/// A value of every kind the record reader reads, with a synthesized `init(from:)` and a
/// hand-written `init(record:)` that must agree with it on every input.
struct Sample: Codable, CBORRecordDecodable {
    struct Inner: Codable, Equatable {
        var label: String
        var values: [Double]
    }

    var s: String
    var i: Int
    var i64: Int64
    var u64: UInt64
    var u: UInt
    var i32: Int32
    var u32: UInt32
    var i16: Int16
    var u16: UInt16
    var i8: Int8
    var u8: UInt8
    var d: Double
    var f: Float
    var b: Bool
    var data: Data
    var bytes: [UInt8]
    var date: Date
    var url: URL
    var opt: String?
    var optInt: Int?
    var tags: [String]
    var inner: Inner?
    var größe: Int
    var precomposed: String
    var decomposed: String

    enum CodingKeys: String, CodingKey {
        case s, i, i64, u64, u, i32, u32, i16, u16, i8, u8, d, f, b, data, bytes, date, url, opt, optInt, tags, inner,
            größe
        case precomposed = "\u{E9}"
        case decomposed = "e\u{301}"
    }

    init(
        s: String, i: Int, i64: Int64, u64: UInt64, u: UInt, i32: Int32, u32: UInt32, i16: Int16, u16: UInt16,
        i8: Int8, u8: UInt8, d: Double, f: Float, b: Bool, data: Data, bytes: [UInt8], date: Date, url: URL,
        opt: String?, optInt: Int?, tags: [String], inner: Inner?, größe: Int, precomposed: String, decomposed: String
    ) {
        self.s = s; self.i = i; self.i64 = i64; self.u64 = u64; self.u = u; self.i32 = i32; self.u32 = u32
        self.i16 = i16; self.u16 = u16; self.i8 = i8; self.u8 = u8; self.d = d; self.f = f; self.b = b
        self.data = data; self.bytes = bytes; self.date = date; self.url = url; self.opt = opt; self.optInt = optInt
        self.tags = tags; self.inner = inner; self.größe = größe; self.precomposed = precomposed;
        self.decomposed = decomposed
    }

    init(record: inout CBORRecordReader) throws {
        var s: String?, i: Int?, i64: Int64?, u64: UInt64?, u: UInt?, i32: Int32?, u32: UInt32?, i16: Int16?
        var u16: UInt16?, i8: Int8?, u8: UInt8?, d: Double?, f: Float?, b: Bool?, data: Data?, bytes: [UInt8]?
        var date: Date?, url: URL?, opt: String?, optInt: Int?, tags: [String]?, inner: Inner?, größe: Int?
        var precomposed: String?, decomposed: String?
        while let field = try record.nextField() {
            switch field {
            case "s": s = try record.string()
            case "i": i = try record.int()
            case "i64": i64 = try record.int64()
            case "u64": u64 = try record.uint64()
            case "u": u = try record.uint()
            case "i32": i32 = try record.int32()
            case "u32": u32 = try record.uint32()
            case "i16": i16 = try record.int16()
            case "u16": u16 = try record.uint16()
            case "i8": i8 = try record.int8()
            case "u8": u8 = try record.uint8()
            case "d": d = try record.double()
            case "f": f = try record.float()
            case "b": b = try record.bool()
            case "data": data = try record.data()
            case "bytes": bytes = try record.bytes()
            case "date": date = try record.date()
            case "url": url = try record.url()
            case "opt": opt = try record.optional { try $0.string() }
            case "optInt": optInt = try record.optional { try $0.int() }
            case "tags": tags = try record.decode([String].self)
            case "inner": inner = try record.optional { try $0.decode(Inner.self) }
            case "größe": größe = try record.int()
            case "\u{E9}": precomposed = try record.string()
            case "e\u{301}": decomposed = try record.string()
            default: try record.skip()
            }
        }
        func need<T>(_ value: T?, _ name: String) throws -> T {
            guard let value else { throw record.missingField(name) }
            return value
        }
        self.init(
            s: try need(s, "s"), i: try need(i, "i"), i64: try need(i64, "i64"), u64: try need(u64, "u64"),
            u: try need(u, "u"), i32: try need(i32, "i32"), u32: try need(u32, "u32"), i16: try need(i16, "i16"),
            u16: try need(u16, "u16"), i8: try need(i8, "i8"), u8: try need(u8, "u8"), d: try need(d, "d"),
            f: try need(f, "f"), b: try need(b, "b"), data: try need(data, "data"), bytes: try need(bytes, "bytes"),
            date: try need(date, "date"), url: try need(url, "url"), opt: opt, optInt: optInt,
            tags: try need(tags, "tags"), inner: inner, größe: try need(größe, "größe"),
            precomposed: try need(precomposed, "\u{E9}"), decomposed: try need(decomposed, "e\u{301}"))
    }
}

/// The two decoding paths over the same bytes.
enum Paths {
    static func codable(_ bytes: [UInt8]) -> Result<Sample, CBORError> {
        do { return .success(try CBORDecoder().decode(Sample.self, from: bytes)) } catch let error as CBORError {
            return .failure(error)
        } catch { return .failure(CBORError(.invalidValue, "not a CBORError: \(error)")) }
    }

    static func fast(_ bytes: [UInt8]) -> Result<Sample, CBORError> {
        do {
            return .success(try bytes.withUnsafeBytes { try CBORRecordReader.decode(Sample.self, from: $0) })
        } catch let error as CBORError { return .failure(error) } catch {
            return .failure(CBORError(.invalidValue, "not a CBORError: \(error)"))
        }
    }

    /// The value re-encoded: equal bytes mean equal values, bit for bit (NaN payloads, -0.0, the
    /// exact bytes of every string).
    static func encoded(_ value: Sample) throws -> [UInt8] { try CBOREncoder().encode(value) }
}

@Suite("CBORRecordReader reads exactly what CBORDecoder reads")
struct RecordReaderTests {
    static let strings = [
        "", "\u{0}", "a\u{0}b", "\u{E9}", "e\u{301}", "größe", "🧪💥", String(repeating: "x", count: 70_000),
        String(repeating: "é", count: 3_000), "plain",
    ]
    static let doubles: [Double] = [
        0, -0.0, .nan, -.nan, .infinity, -.infinity, .greatestFiniteMagnitude,
        .leastNonzeroMagnitude, 1.5, -2, 0x1p64, 1e-300, 65504, 0.1,
    ]
    static let floats: [Float] = [
        0, -0.0, .nan, .infinity, -.infinity, .greatestFiniteMagnitude, 1.5, .leastNonzeroMagnitude,
    ]

    static func random(_ g: inout SeededGenerator) -> Sample {
        func pick<T>(_ values: [T]) -> T { values[Int(g.next() % UInt64(values.count))] }
        func int<T: FixedWidthInteger>(_ type: T.Type) -> T {
            pick([T.min, T.max, 0, 1, T(truncatingIfNeeded: g.next()), T(truncatingIfNeeded: g.next() % 30)])
        }
        return Sample(
            s: pick(strings), i: int(Int.self), i64: int(Int64.self), u64: int(UInt64.self), u: int(UInt.self),
            i32: int(Int32.self), u32: int(UInt32.self), i16: int(Int16.self), u16: int(UInt16.self),
            i8: int(Int8.self), u8: int(UInt8.self), d: pick(doubles + [Double(bitPattern: g.next())]),
            f: pick(floats + [Float(bitPattern: UInt32(truncatingIfNeeded: g.next()))]), b: g.next() % 2 == 0,
            data: Data(pick([[], [0], [0xFF, 0, 1], Array(repeating: 7, count: 1_000)])),
            bytes: pick([[], [0, 255], [1, 2, 3]]),
            date: pick([
                Date(timeIntervalSince1970: 0), Date(timeIntervalSinceReferenceDate: -1e9),
                Date(timeIntervalSince1970: Double(g.next() % 4_000_000_000) / 7),
            ]),
            url: pick([URL(string: "https://example.com/a?b=c"), URL(string: "file:///tmp/x")])
                ?? URL(fileURLWithPath: "/"),
            opt: g.next() % 3 == 0 ? nil : pick(strings), optInt: g.next() % 3 == 0 ? nil : int(Int.self),
            tags: Array(strings.prefix(Int(g.next() % 4))).filter { $0.count < 100 },
            inner: g.next() % 3 == 0 ? nil : Sample.Inner(label: pick(strings), values: [pick(doubles), 1]),
            größe: int(Int.self), precomposed: pick(strings), decomposed: pick(strings))
    }

    /// Both paths give the same value, or the same error.
    func expectSame(_ bytes: [UInt8], sourceLocation: SourceLocation = #_sourceLocation) throws {
        switch (Paths.codable(bytes), Paths.fast(bytes)) {
        case let (.success(a), .success(b)):
            #expect(try Paths.encoded(a) == Paths.encoded(b), sourceLocation: sourceLocation)
        case let (.failure(a), .failure(b)):
            #expect(a == b, "\(a) vs \(b)", sourceLocation: sourceLocation)
        case let (a, b):
            Issue.record("the paths disagree: Codable \(a), fast \(b)", sourceLocation: sourceLocation)
        }
    }

    @Test func randomAndEdgeObjectsReadTheSame() throws {
        var g = SeededGenerator(seed: 13)
        for _ in 0..<400 {
            let sample = Self.random(&g)
            let bytes = try Paths.encoded(sample)
            let fast = try Paths.fast(bytes).get()
            // The fast path gives back exactly the stored bytes, and what Codable gives.
            #expect(try Paths.encoded(fast) == bytes)
            try expectSame(bytes)
            #expect(fast.precomposed == sample.precomposed && fast.d.bitPattern == sample.d.bitPattern)
        }
    }

    /// The map of `sample` as a `CBORValue`, to be edited.
    static func entries(_ sample: Sample) throws -> [CBORMapEntry] {
        guard case .map(let entries) = try CBORValue(decoding: Paths.encoded(sample)) else {
            Issue.record("not a map")
            return []
        }
        return entries
    }

    static func sample() -> Sample {
        var g = SeededGenerator(seed: 7)
        var sample = random(&g)
        // Short texts, so that the tests that decode every truncation stay quick.
        sample.s = "e\u{301}\u{0}s"
        sample.precomposed = "\u{E9}"
        sample.decomposed = ""
        sample.tags = ["a", "\u{E9}"]
        sample.opt = "o"
        sample.optInt = 5
        sample.inner = Sample.Inner(label: "in", values: [1, .nan])
        return sample
    }

    @Test func unknownFieldsOfANewerVersionAreSkipped() throws {
        var entries = try Self.entries(Self.sample())
        let extras: [CBORMapEntry] = [
            CBORMapEntry(key: "added", value: ["deep": [1, 2, ["x": nil]], "n": -5]),
            CBORMapEntry(key: "E\u{301}", value: .bytes([1, 2])),  // a name no field has
            CBORMapEntry(key: .unsigned(7), value: "a key that is not text"),
            CBORMapEntry(key: "\u{E9}\u{0}", value: .float(.nan)),
        ]
        for (n, extra) in extras.enumerated() { entries.insert(extra, at: min(entries.count, n * 5)) }
        let bytes = CBORValue.map(entries).encoded()
        let fast = try Paths.fast(bytes).get()
        #expect(try Paths.encoded(fast) == Paths.encoded(Self.sample()))
        try expectSame(bytes)
        // In reverse order too: the reader does not depend on the encoding order.
        try expectSame(CBORValue.map(entries.reversed()).encoded())
    }

    @Test func absentAndNullOptionalsAreNil() throws {
        for edit in ["absent", "null", "undefined"] {
            var entries = try Self.entries(Self.sample())
            switch edit {
            case "absent": entries.removeAll { ["opt", "optInt", "inner"].contains($0.key.textValue ?? "") }
            case "null":
                entries = entries.map {
                    ["opt", "optInt", "inner"].contains($0.key.textValue ?? "")
                        ? CBORMapEntry(key: $0.key, value: .null) : $0
                }
            default:
                entries = entries.map {
                    ["opt", "optInt", "inner"].contains($0.key.textValue ?? "")
                        ? CBORMapEntry(key: $0.key, value: .undefined) : $0
                }
            }
            let bytes = CBORValue.map(entries).encoded()
            let fast = try Paths.fast(bytes).get()
            #expect(fast.opt == nil && fast.optInt == nil && fast.inner == nil, "\(edit)")
            try expectSame(bytes)
        }
    }

    /// Replaces the value of `key` and checks both paths agree (value or error).
    func replaced(_ key: String, with value: CBORValue) throws -> Result<Sample, CBORError> {
        let entries = try Self.entries(Self.sample()).map {
            $0.key.textValue == key ? CBORMapEntry(key: $0.key, value: value) : $0
        }
        let bytes = CBORValue.map(entries).encoded()
        try expectSame(bytes)
        return Paths.fast(bytes)
    }

    @Test func conversionsAndRangeChecksMatchTheDecoder() throws {
        let cases: [(String, CBORValue)] = [
            ("u8", 256), ("u8", -1), ("i8", -129), ("i8", .float(3.0)), ("i8", .float(3.5)), ("i", .unsigned(.max)),
            ("i64", .negative(.max)), ("u64", .unsigned(.max)), ("u64", .float(0x1p64)), ("i", .float(.nan)),
            ("d", "NaN"), ("d", "-Infinity"), ("d", "nope"), ("d", .unsigned(.max)), ("d", .negative(.max)),
            ("d", .unsigned((1 << 53) + 1)), ("f", .float(1e300)), ("f", .float(.infinity)),
            ("f", .unsigned(16_777_217)),
            ("f", .float(0.1)), ("b", 1), ("b", .null), ("s", .bytes([0x61])), ("s", .null),
            ("s", .tagged(99, "tagged")),
            ("data", "AAEC"), ("data", "not base64!"), ("data", [0, 1, 256]), ("data", [1, 2]), ("bytes", .bytes([1])),
            ("bytes", [1, 300]), ("date", .tagged(1, 0)), ("date", .tagged(1001, [1: 5])), ("date", .tagged(1, "x")),
            ("date", 12.5), ("url", .tagged(32, "https://a.b")), ("url", ""), ("tags", ["a", 1]), ("tags", "a"),
            ("inner", ["label": "x"]), ("opt", 5), ("größe", .float(-0.0)), ("i32", .unsigned(1 << 31)),
        ]
        for (key, value) in cases {
            let result = try replaced(key, with: value)
            if case .failure(let error) = result {
                // The error names the field (the decoder's coding path) and where it is.
                #expect(error.codingPath.hasPrefix(key), "\(key): \(error)")
                #expect(error.kind == .keyNotFound || error.offset != nil, "\(key): \(error)")
            }
        }
        #expect(try replaced("d", with: "NaN").get().d.isNaN)
        #expect(try replaced("i8", with: .float(3.0)).get().i8 == 3)
        #expect(try replaced("u64", with: .unsigned(.max)).get().u64 == .max)
        #expect(try replaced("data", with: [1, 2]).get().data == Data([1, 2]))
    }

    @Test func namesAreComparedAsBytes() throws {
        // "é" (c3 a9) and "e\u{301}" (65 cc 81) are canonically equal strings, but other fields.
        var sample = Self.sample()
        sample.precomposed = "first"
        sample.decomposed = "second"
        let fast = try Paths.fast(Paths.encoded(sample)).get()
        #expect(fast.precomposed == "first" && fast.decomposed == "second")
        // With only the decomposed name present, the precomposed field is missing (both paths).
        let entries = try Self.entries(sample).filter { $0.key != .text("\u{E9}") }
        let error = try #require(Paths.fast(CBORValue.map(entries).encoded()).failure)
        #expect(error.kind == .keyNotFound && error.codingPath == "\u{E9}")
        try expectSame(CBORValue.map(entries).encoded())

        let bytes: [UInt8] = [0xA1, 0x62, 0xC3, 0xA9, 0x01]  // {"é": 1}
        try bytes.withUnsafeBytes { raw in
            var reader = try CBORRecordReader(raw)
            let field = try #require(try reader.nextField())
            #expect(field == "\u{E9}")
            #expect(!(field == "e\u{301}"))
            #expect(field.matches(utf8: [0xC3, 0xA9]) && !field.matches(utf8: Array("e\u{301}".utf8)))
            #expect(field.name == "\u{E9}")
            let value = try reader.int()
            #expect(value == 1)
            let end = try reader.nextField()
            #expect(end == nil)
        }
    }

    @Test func everyTruncationFailsTheSameWay() throws {
        let bytes = try Paths.encoded(Self.sample())
        for length in 0..<bytes.count {
            let cut = Array(bytes.prefix(length))
            guard case .failure = Paths.fast(cut) else {
                Issue.record("a truncation to \(length) bytes decoded")
                continue
            }
            try expectSame(cut)
        }
    }

    @Test func damagedBytesFailOrReadTheSame() throws {
        let original = try Paths.encoded(Self.sample())
        var g = SeededGenerator(seed: 99)
        var failures = 0
        for round in 0..<3_000 {
            var bytes = original
            for _ in 0...(round % 3) {
                bytes[Int(g.next() % UInt64(bytes.count))] = UInt8(truncatingIfNeeded: g.next())
            }
            switch (Paths.codable(bytes), Paths.fast(bytes)) {
            case let (.success(a), .success(b)):
                #expect(try Paths.encoded(a) == Paths.encoded(b))
            case (.failure, .failure):
                failures += 1
            case let (.success, .failure(error)):
                // Only where the damage made a name occur twice: Codable takes one of the two
                // values, the reader refuses to choose.
                #expect(error.kind == .malformed && error.message.contains("twice"), "\(error)")
            case let (.failure(error), .success):
                Issue.record("the fast path read what Codable refuses: \(error)")
            }
        }
        #expect(failures > 1_000)
    }

    @Test func malformedRecordsAreTypedErrors() throws {
        let good = try Paths.encoded(Self.sample())
        // Trailing bytes, an overlong map count, an overlong string, bad UTF-8, not a map, empty.
        #expect(Paths.fast(good + [0x00]).failure?.kind == .trailingBytes)
        var overlong = good
        overlong[0] = 0xBB  // a map whose 8-byte count follows
        try expectSame(overlong)
        #expect(Paths.fast([0xBB, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]).failure?.kind == .lengthTooLarge)
        #expect(Paths.fast([0xA1, 0x61, 0x73, 0x7A, 0xFF, 0xFF, 0xFF, 0xFF]).failure?.kind == .lengthTooLarge)
        let marker: [UInt8] = [0x64, 0x7F, 0x7E, 0x7F, 0x7E]  // the text "\u{7F}~\u{7F}~"
        let sEntry = try Self.entries(Self.sample()).map {
            $0.key.textValue == "s" ? CBORMapEntry(key: $0.key, value: "\u{7F}~\u{7F}~") : $0
        }
        var bytes = CBORValue.map(sEntry).encoded()
        let at = try #require((0..<(bytes.count - 4)).first { Array(bytes[$0..<($0 + 5)]) == marker })
        bytes[at + 1] = 0xC3  // a lead byte followed by no continuation byte
        let error = try #require(Paths.fast(bytes).failure)
        #expect(error.kind == .invalidUTF8 && error.codingPath == "s")
        try expectSame(bytes)
        #expect(Paths.fast([0x80]).failure?.kind == .typeMismatch)
        #expect(Paths.fast([0xF6]).failure?.kind == .valueNotFound)
        #expect(Paths.fast([]).failure?.kind == .unexpectedEnd)
        #expect(Paths.fast([0xBF, 0xFF]).failure?.kind == .unsupported)
        // A name that occurs twice is refused, naming it.
        var doubled = try Self.entries(Self.sample())
        doubled.append(CBORMapEntry(key: "i", value: 1))
        let duplicate = try #require(Paths.fast(CBORValue.map(doubled).encoded()).failure)
        #expect(duplicate.kind == .malformed && duplicate.codingPath == "i", "\(duplicate)")
    }

    @Test func misuseIsAnErrorNotACrash() throws {
        let bytes: [UInt8] = [0xA2, 0x61, 0x61, 0x01, 0x61, 0x62, 0x02]  // {"a": 1, "b": 2}
        try bytes.withUnsafeBytes { raw in
            var reader = try CBORRecordReader(raw)
            #expect(throws: CBORError.self) { try reader.int() }  // before nextField
            _ = try reader.nextField()
            let a = try reader.int()
            #expect(a == 1)
            #expect(throws: CBORError.self) { try reader.int() }  // read twice
            let isNil = reader.isNil()
            #expect(!isNil)
            let b = try #require(try reader.nextField())
            #expect(b == "b")
            let end = try reader.nextField()  // b's value skipped
            let again = try reader.nextField()
            #expect(end == nil && again == nil)
            let offset = reader.offset
            #expect(offset == bytes.count)
        }
    }

    @Test func nestedValuesDecodeThroughTheFallbackWithOffsets() throws {
        let result = try replaced("tags", with: ["ok", .bytes([1])])
        let error = try #require(result.failure)
        #expect(error.kind == .typeMismatch && error.codingPath == "tags[1]", "\(error)")
        let encoded = CBORValue.map(
            try Self.entries(Self.sample()).map {
                $0.key.textValue == "tags" ? CBORMapEntry(key: $0.key, value: ["ok", .bytes([1])]) : $0
            }
        ).encoded()
        // The offset is that of the bad element in the whole record.
        let offset = try #require(error.offset)
        #expect(encoded[offset] == 0x41)
    }
}

extension Result {
    var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}

extension CBORValue {
    var textValue: String? {
        if case .text(let text) = self { return text }
        return nil
    }
}
