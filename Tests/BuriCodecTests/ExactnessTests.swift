import BuriCodec
import Foundation
import Testing

/// Numbers are exact or refused; a Date means one thing; the exact JSON form gives back every item.
@Suite("Numbers, dates and the exact JSON form are exact or refused")
struct ExactnessTests {
    // MARK: JSON numbers

    @Test func integersAreExactToTheEdgesOfCBOR() throws {
        let cases: [(String, CBORValue)] = [
            ("-9223372036854775809", .negative(9_223_372_036_854_775_808)),  // -2^63 - 1
            ("-9223372036854775808", .negative(9_223_372_036_854_775_807)),  // Int64.min
            ("-18446744073709551616", .negative(.max)),  // -2^64
            ("18446744073709551615", .unsigned(.max)),  // 2^64 - 1
            ("9007199254740993", .unsigned(9_007_199_254_740_993)),  // 2^53 + 1
            ("-0", .unsigned(0)),
        ]
        for (text, expected) in cases {
            #expect(try CBORValue(json: text) == expected, "\(text)")
            #expect(try CBORValue(json: "[\(text)]") == [expected], "\(text)")
            #expect(try CBORValue(jsonNumber: " \(text) ") == expected, "\(text)")
            #expect(try CBORValue(json: text).jsonString() == (text == "-0" ? "0" : text))
        }
    }

    @Test func integersBeyondCBORAreRefusedNotRounded() throws {
        for text in ["18446744073709551616", "-18446744073709551617", "123456789012345678901234567890"] {
            let error = expectCBORError(.invalidJSON) { _ = try CBORValue(json: #"{"a": {"b": [0, \#(text)]}}"#) }
            #expect(error?.message.contains("the integer \(text) is outside") == true, "\(String(describing: error))")
            #expect(error?.codingPath == "a.b[1]")
            #expect(error?.line == 1 && error?.column == 17)
            expectCBORError(.invalidJSON) { _ = try CBORValue(jsonNumber: text) }
        }
    }

    @Test func decimalsBecomeTheDoubleTheyNameOrAreRefused() throws {
        let accepted: [(String, Double)] = [
            ("0.1", 0.1), ("2.50", 2.5), ("1E3", 1000), ("1e-7", 1e-7), ("5e-324", .leastNonzeroMagnitude),
            ("1.7976931348623157e308", .greatestFiniteMagnitude), ("0.000", 0), ("0e99999999999", 0),
            ("1.8446744073709552e19", 0x1p64), ("9007199254740992.0", 0x1p53), ("123456789.125", 123_456_789.125),
        ]
        for (text, double) in accepted {
            let value = try CBORValue(json: text)
            #expect(value == .float(double), "\(text) -> \(value)")
            #expect(try CBORValue(jsonNumber: text) == .float(double))
        }
        // -0.0 keeps its sign.
        let negativeZero = try CBORValue(json: "-0.0")
        #expect(negativeZero.doubleValue.map { $0 == 0 && $0.sign == .minus } == true)
        #expect(negativeZero.jsonString() == "-0.0")

        let refused: [(String, String)] = [
            ("1e400", "too large for a double"), ("-1e400", "would become -infinity"),
            ("1e-400", "too small for a double"), ("-2.5e-330", "too small"),
            ("9007199254740993.0", "the nearest double is 9007199254740992.0"),
            ("0.30000000000000001", "the nearest double is 0.3"),
            ("1.00000000000000000001", "more precision than a double holds"),
        ]
        for (text, fragment) in refused {
            let error = expectCBORError(.invalidJSON) { _ = try CBORValue(json: #"{"x": \#(text)}"#) }
            #expect(error?.message.contains(fragment) == true, "\(text): \(String(describing: error))")
            #expect(error?.codingPath == "x")
            expectCBORError(.invalidJSON) { _ = try CBORValue(jsonNumber: text) }
        }
    }

    /// A double written with every digit of its exact value is exactly that double, however far
    /// that is from its shortest form: 2^62 written out, -2^64 with a ".0", with an exponent, with
    /// trailing zeros. Only a literal that is neither the exact value nor the shortest form of the
    /// double it rounds to is refused.
    @Test func doublesWrittenInFullAreAcceptedExactly() throws {
        let accepted: [(String, Double)] = [
            ("-18446744073709551616.0", -0x1p64), ("4611686018427387904.0", 0x1p62),
            ("4611686018427387904.000", 0x1p62),
            ("4.611686018427387904e18", 0x1p62), ("46116860184273879040e-1", 0x1p62),
            ("0.4611686018427387904E+19", 0x1p62),
            ("18446744073709551616.0", 0x1p64), ("-9223372036854775808.0", -0x1p63), ("36893488147419103232.0", 0x1p65),
            ("0.1000000000000000055511151231257827021181583404541015625", 0.1),
            ("1e23", 1e23), ("99999999999999991611392.0", 1e23), ("5e-324", .leastNonzeroMagnitude),
        ]
        for (text, double) in accepted {
            #expect(try CBORValue(json: text) == .float(double), "\(text)")
            #expect(try CBORValue(jsonNumber: text) == .float(double), "\(text)")
            #expect(try CBORValue(json: "[\(text)]") == [.float(double)], "\(text)")
        }
        for text in [
            "4611686018427387904.5", "4611686018427387905.0", "4611686018427387903.0", "-18446744073709551617.0",
            "0.10000000000000000555", "9007199254740993.0e0", "4.6116860184273879e18",
        ] {
            let error = expectCBORError(.invalidJSON) { _ = try CBORValue(jsonNumber: text) }
            #expect(
                error?.message.contains("more precision than a double holds") == true,
                "\(text): \(String(describing: error))")
        }
    }

    /// `exactDouble` takes any decimal (integers beyond 64 bits too) that is exactly a double, and
    /// nothing else: not the shortest form of another number, not hex, inf or a '+'.
    @Test func exactDoubleNamesOnlyDoublesExactly() {
        let exact: [(String, Double)] = [
            ("36893488147419103232", 0x1p65), ("-18446744073709551616", -0x1p64), ("4611686018427387904.0", 0x1p62),
            ("0.5", 0.5), ("-0.0", -0.0), ("1e0", 1), (" 2.50 ", 2.5), ("5e-324", 0),
        ]
        for (text, double) in exact where double != 0 || text == "-0.0" {
            #expect(CBORValue.exactDouble(text) == double, "\(text)")
        }
        for text in [
            "36893488147419103233", "0.1", "1e23", "5e-324", "0x10", "+1", "inf", "nan", "1.", ".5", "1e", "", "1 2",
            "1e400",
        ] {
            #expect(CBORValue.exactDouble(text) == nil, "\(text)")
        }
    }

    /// Property: random doubles (every binade, subnormals, integers beyond 2^53) printed with all
    /// the digits of their exact value by the C library — fixed-point, with an exponent, with
    /// trailing zeros — read back as exactly that double; the same text with one more digit that
    /// rounds back to the double is refused, never rounded.
    @Test func randomDoublesPrintedExactlyReadBackExactly() throws {
        var generator = SystemRandomNumberGenerator()
        let seed = UInt64.random(in: 0...UInt64.max, using: &generator)
        var random = SeededGenerator(seed: seed)
        let count = ProcessInfo.processInfo.environment["BURI_FULL_TESTS"] == "1" ? 20_000 : 1_500
        for round in 0..<count {
            let double: Double
            switch round % 3 {
            case 0: double = Double(bitPattern: random.next())  // any bits
            case 1:
                double =
                    Double(Int64(bitPattern: random.next()) >> Int64(random.next() % 60))
                    * Double(sign: .plus, exponent: Int(random.next() % 200) - 100, significand: 1)  // integers scaled
            default:
                double = Double(
                    sign: random.next() & 1 == 0 ? .plus : .minus, exponent: Int(random.next() % 2098) - 1074,
                    significand: 1)
            }
            guard double.isFinite, double != 0 else { continue }
            // glibc prints the exact decimal value when asked for enough digits (1074 after the point suffice).
            var fixed = String(format: "%.1100f", double)
            while fixed.hasSuffix("0") { fixed.removeLast() }
            if fixed.hasSuffix(".") { fixed += "0" }
            let negative = fixed.hasPrefix("-")
            let unsigned = negative ? String(fixed.dropFirst()) : fixed
            let parts = unsigned.split(separator: ".", omittingEmptySubsequences: false)
            let allDigits = String((parts[0] + parts[1]).drop { $0 == "0" })
            let scientific =
                (negative ? "-" : "") + String(allDigits.prefix(1)) + "."
                + (allDigits.count > 1 ? String(allDigits.dropFirst()) : "0")
                + "e" + String(parts[0] == "0" ? -(parts[1].prefix { $0 == "0" }.count + 1) : parts[0].count - 1)
            let integerForm = (negative ? "-" : "") + allDigits + "0000e" + String(-(parts[1].count) - 4)
            for text in [fixed, fixed + "000", scientific, integerForm] {
                #expect(
                    try CBORValue(jsonNumber: text) == .float(double),
                    "seed \(seed): \(double.debugDescription) as \(text.prefix(80))…")
            }
            // One more digit, far below the last one: still rounds to the double, but is not it.
            let finer = fixed + "00000000000000000001"
            if Double(finer) == double {
                let error = expectCBORError(.invalidJSON) { _ = try CBORValue(jsonNumber: finer) }
                #expect(
                    error?.message.contains("more precision than a double holds") == true,
                    "seed \(seed): \(double.debugDescription)")
            }
        }
    }

    @Test func queryLiteralsTakeInfinityButNothingElseThatIsNotANumber() throws {
        #expect(try CBORValue(jsonNumber: "Infinity") == .float(.infinity))
        #expect(try CBORValue(jsonNumber: "-Infinity") == .float(-.infinity))
        for text in ["", "abc", "NaN", "\"1\"", "[1]", "+1", ".5", "1.", "0x10", "1 2", "inf"] {
            expectCBORError(.invalidJSON) { _ = try CBORValue(jsonNumber: text) }
        }
    }

    @Test func repeatedMemberNamesAreRefusedComparedAsBytes() throws {
        for json in [
            #"{"id":"a","v":1,"v":"x"}"#, #"{"id":"a","id":"b"}"#, #"{"a":[{"k":1,"k":1}]}"#, #"{"\u00e9":1,"é":2}"#,
        ] {
            let error = expectCBORError(.invalidJSON) { _ = try CBORValue(json: json) }
            #expect(error?.message.contains("two members named") == true, "\(json): \(String(describing: error))")
        }
        expectCBORError(.invalidJSON) { _ = try CBORValue(exactJSON: #"{"id":"a","id":"b"}"#) }
        // Canonically equal but byte-different names are two names: "é" (c3 a9) and "e\u{301}" (65 cc 81).
        let value = try CBORValue(json: "{\"é\":1,\"e\u{301}\":2}")
        #expect(
            value.mapEntries?.map { Array($0.key.stringValue?.utf8 ?? "".utf8) } == [
                [0xC3, 0xA9], [0x65, 0xCC, 0x81],
            ])
    }

    // MARK: Dates

    struct Stamped: Codable, Equatable {
        var when: Date
        var maybe: Date?
        var many: [Date]
    }

    @Test func datesAreTag1EpochSecondsAndComeBackExactly() throws {
        // A deterministic spread of dates: whole, fractional, tiny, huge, negative, non-finite.
        var seeds: [Double] = [
            0, -0.0, 1, -1, 0.1, -0.1, 0.5, 1234.5, 712_345_678.125, 817_069_384.2247981, -978_307_200, -978_307_200.25,
            1e-300, -1e-300, .leastNonzeroMagnitude, .greatestFiniteMagnitude, -.greatestFiniteMagnitude, 4e18, 9.3e18,
            Date.distantPast.timeIntervalSinceReferenceDate, Date.distantFuture.timeIntervalSinceReferenceDate,
            Date().timeIntervalSinceReferenceDate, .infinity, -.infinity,
        ]
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        for _ in 0..<3000 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            seeds.append(Double(Int64(bitPattern: state) >> 30) / 1024 + 7e8)  // 2023-ish, fractions of a second
            seeds.append(Double(bitPattern: state >> 1 | (state & 1) << 63))  // any bit pattern
        }
        for t in seeds where !t.isNaN {
            let date = Date(timeIntervalSinceReferenceDate: t)
            let bytes = try CBOREncoder().encode(Stamped(when: date, maybe: date, many: [date, date]))
            let back = try CBORDecoder().decode(Stamped.self, from: bytes)
            #expect(back.when.timeIntervalSinceReferenceDate == t, "\(t)")
            #expect(back.maybe == date && back.many == [date, date])
            let item = try #require(try CBORValue(decoding: bytes)["when"])
            #expect(item.isTaggedDate, "\(t): \(item)")
            #expect(item.dateValue == date)
            #expect(CBORValue(date: date) == item)
            // The plain JSON shows seconds since 1970, as Date.timeIntervalSince1970 gives them
            // (beyond 2^53 s, some 285 million years, it shows the exact integer that rounds to it).
            if t.isFinite, t.magnitude < 0x1p53 {
                #expect(try CBORValue(json: item.jsonString()).doubleValue == date.timeIntervalSince1970, "\(t)")
            }
        }
    }

    @Test func dateFormsAreTheDocumentedOnes() throws {
        // Whole seconds: tag 1 around an integer.
        #expect(CBORValue(date: Date(timeIntervalSince1970: 1_700_000_000)) == .tagged(1, 1_700_000_000))
        #expect(CBORValue(date: Date(timeIntervalSince1970: -1)) == .tagged(1, -1))
        // A fraction that seconds since 1970 hold exactly: tag 1 around a float.
        #expect(CBORValue(date: Date(timeIntervalSince1970: 1_700_000_000.5)) == .tagged(1, 1_700_000_000.5))
        // Seconds since 2001 = 2^-23 past 2^29 needs one bit more than a float64 of seconds since
        // 1970 keeps: the exact bigfloat form.
        let fine = Date(timeIntervalSinceReferenceDate: 0x1p29 + 0x1p-23)
        let item = CBORValue(date: fine)
        guard case .tagged(1001, .map(let entries)) = item, entries.count == 1, entries[0].key == 5,
            case .array(let parts) = entries[0].value, parts.count == 2
        else {
            Issue.record("expected tag 1001 {5: [e, m]}, got \(item)")
            return
        }
        // m × 2^e = 536870912 + 978307200 + 2^-23 exactly.
        #expect(parts[0] == -23)
        #expect(parts[1] == .unsigned((536_870_912 + 978_307_200) << 23 + 1))
        #expect(item.dateValue == fine)
        #expect(try CBORDecoder().decode(Date.self, from: item.encoded()) == fine)
    }

    @Test func datesWrittenByVersion1AndByOthersStillRead() throws {
        // Version 1 wrote Foundation's own form: an untagged float64 of seconds since 2001.
        #expect(
            try CBORDecoder().decode(Date.self, from: CBORValue.float(1234.5).encoded())
                == Date(timeIntervalSinceReferenceDate: 1234.5))
        #expect(
            try CBORDecoder().decode(Date.self, from: CBORValue.int(-7).encoded())
                == Date(timeIntervalSinceReferenceDate: -7))
        #expect(CBORValue.float(0).dateValue == Date(timeIntervalSinceReferenceDate: 0))
        // Tag 1 in any number form, and tag 1001 {1: seconds}.
        for item: CBORValue in [
            .tagged(1, 978_307_200), .tagged(1, 978_307_200.0), .tagged(1, .float(978_307_200)),
            .tagged(1001, [1: 978_307_200]), .tagged(55799, .tagged(1, 978_307_200)),
        ] {
            #expect(
                try CBORDecoder().decode(Date.self, from: item.encoded()) == Date(timeIntervalSinceReferenceDate: 0),
                "\(item)")
        }
        #expect(
            try CBORDecoder().decode(Date.self, from: CBORValue.tagged(1, .negative(.max)).encoded())
                == Date(timeIntervalSince1970: -0x1p64))
        // Anything else in a date's place is an error, not a guess.
        for item: CBORValue in [
            .tagged(1, "2024-01-01"), .tagged(1001, [-9: 5]), .tagged(1001, [5: [0]]), .tagged(1001, 3), "soon", [1],
        ] {
            expectCBORError { _ = try CBORDecoder().decode(Date.self, from: item.encoded()) }
        }
        // A bigfloat that is not exactly a Date (2^-2000 past the epoch) is refused.
        expectCBORError(.valueOutOfRange) {
            _ = try CBORDecoder().decode(Date.self, from: CBORValue.tagged(1001, [5: [-1100, 1]]).encoded())
        }
    }

    // MARK: 128-bit integers

    struct Wide: Codable, Equatable {
        var signed: Int128
        var unsigned: UInt128
        var list: [Int128]
        var optional: UInt128?
    }

    @Test func wideIntegersAreExactWithinCBORAndRefusedBeyond() throws {
        let minimum = -Int128(UInt64.max) - 1  // -2^64
        let value = Wide(
            signed: minimum, unsigned: UInt128(UInt64.max), list: [0, -1, Int128(Int64.min) - 1, Int128(UInt64.max)],
            optional: 5)
        let bytes = try CBOREncoder().encode(value)
        #expect(try CBORDecoder().decode(Wide.self, from: bytes) == value)
        #expect(try CBORValue(decoding: bytes)["signed"] == .negative(.max))
        #expect(try CBORValue(decoding: bytes)["list"]?[2] == .negative(9_223_372_036_854_775_808))
        for bad in [
            Wide(signed: minimum - 1, unsigned: 0, list: [], optional: nil),
            Wide(signed: 0, unsigned: UInt128(UInt64.max) + 1, list: [], optional: nil),
            Wide(signed: 0, unsigned: 0, list: [.max], optional: nil),
            Wide(signed: 0, unsigned: 0, list: [], optional: .max),
        ] {
            let error = expectCBORError(.invalidValue) { _ = try CBOREncoder().encode(bad) }
            #expect(error?.message.contains("outside -2^64 ... 2^64 - 1") == true, "\(String(describing: error))")
        }
        #expect(try roundTrip(Int128(-5)) == -5)
        expectCBORError(.valueOutOfRange) {
            _ = try CBORDecoder().decode(UInt128.self, from: CBORValue.int(-1).encoded())
        }
    }

    // MARK: The exact JSON form

    /// Values the JSON bridge cannot say in plain JSON, and ordinary ones.
    static let tricky: [CBORValue] = [
        [
            "ints": [0, -1, .unsigned(.max), .negative(.max), .unsigned(1 << 53 + 1), .negative(1 << 63)],
            "floats": [
                20.0, 0.1, 1e21, 1e-5, -0.0, .float(Double(Float(0.1))), .float(.greatestFiniteMagnitude),
                .float(.leastNonzeroMagnitude), .float(.nan), .float(.infinity), .float(-.infinity),
            ],
            "text": ["", "\u{0}", "\"\\", "日本", "é", "e\u{301}", "{\"$bytes\":\"AA==\"}"],
            "bytes": [.bytes([]), .bytes([0xFF]), .bytes(Array(0...255))],
            "tags": [
                .tagged(1, 1.5), .tagged(1001, [5: [-23, .unsigned(1 << 60)]]), .tagged(2, .bytes([1, 0, 0])),
                .tagged(32, "x"),
            ],
            "simple": [.undefined, .simple(7), .simple(255), nil, true, false],
            "keys": [1: 1, .bytes([9]): 2, [1]: 3, "": 4, -1: 5],
            "$dollar": ["$only": 1, "$and": 2],
            "$mixed": "with plain ones",
            "empty": [[:], []],
        ],
        .map([CBORMapEntry(key: "$bytes", value: "not a wrapper")]),
        .map([CBORMapEntry(key: "$tag", value: 1), CBORMapEntry(key: "$value", value: 2)]),
        1.0, "just text", [], .bytes([1]), .float(.infinity), .tagged(0, "2024-01-01T00:00:00Z"),
    ]

    @Test func everyItemSurvivesTheExactFormByteForByte() throws {
        for value in Self.tricky {
            let text = value.exactJSONString()
            let back = try CBORValue(exactJSON: text)
            #expect(back.exactJSONString() == text)
            // NaN is never equal to itself; compare everything else structurally and as CBOR bytes.
            if !text.contains("NaN") {
                #expect(back == value, "\(text)")
                #expect(back.encoded() == value.encoded())
            }
            #expect(!text.contains("\n"))
        }
        #expect(
            CBORValue.map([CBORMapEntry(key: "$bytes", value: "x")]).exactJSONString() == #"{"$map":[["$bytes","x"]]}"#)
        #expect(CBORValue.tagged(1, 1_700_000_000).exactJSONString() == #"{"$tag":1,"$value":1700000000}"#)
    }

    @Test func theDeepestItemCBORAllowsSurvivesInEveryShape() throws {
        let limit = 512
        let shapes: [(String, (CBORValue, Int) -> CBORValue)] = [
            ("array", { inner, _ in .array([inner]) }),
            ("map", { inner, _ in .map([CBORMapEntry(key: "k", value: inner)]) }),
            ("tag", { inner, _ in .tagged(1, inner) }),
            ("keyed map", { inner, _ in .map([CBORMapEntry(key: 1, value: inner)]) }),
            (
                "mixed",
                { inner, level in
                    switch level % 3 {
                    case 0: return .array([inner])
                    case 1: return .tagged(7, inner)
                    default: return .map([CBORMapEntry(key: .bytes([1]), value: inner)])
                    }
                }
            ),
        ]
        for (name, wrap) in shapes {
            var value: CBORValue = .bytes([0xAB])
            for level in 0..<limit { value = wrap(value, level) }
            // Exactly as deep as CBOR input may nest.
            let cbor = value.encoded()
            #expect(try CBORValue(decoding: cbor) == value, "\(name)")
            let text = value.exactJSONString()
            #expect(try CBORValue(exactJSON: text).exactJSONString() == text, "\(name)")
            // One level more is refused by both.
            let deeper = wrap(value, limit)
            #expect(throws: CBORError.self) { try CBORValue(decoding: deeper.encoded()) }
            let error = expectCBORError(.invalidJSON) { _ = try CBORValue(exactJSON: deeper.exactJSONString()) }
            #expect(error?.message.contains("nest deeper than 512") == true, "\(name): \(String(describing: error))")
        }
    }

    /// An error deep in nested input names where it is without repeating every level: the first
    /// and last six steps around "…(N more levels)…", and member names cut at 64 characters.
    @Test func deepPathsInErrorsAreShortenedSayingHowMuch() throws {
        let arrays = #"{"a":"# + String(repeating: "[", count: 600) + String(repeating: "]", count: 600) + "}"
        let arrayError = expectCBORError(.invalidJSON) { _ = try CBORValue(json: arrays) }
        #expect(
            arrayError?.codingPath == "a[0][0][0][0][0]…(500 more levels)…[0][0][0][0][0][0]",
            "\(String(describing: arrayError))")
        let members = #"{"a":"# + String(repeating: #"{"b":"#, count: 600) + "1" + String(repeating: "}", count: 601)
        let memberError = expectCBORError(.invalidJSON) { _ = try CBORValue(json: members) }
        #expect(
            memberError?.codingPath == "a.b.b.b.b.b…(500 more levels)…b.b.b.b.b.b", "\(String(describing: memberError))"
        )
        let tags =
            #"{"a":"# + String(repeating: #"{"$tag":1,"$value":"#, count: 600) + "1"
            + String(repeating: "}", count: 601)
        let tagError = expectCBORError(.invalidJSON) { _ = try CBORValue(exactJSON: tags) }
        #expect(
            tagError?.codingPath.hasPrefix("a{$tag 1}{$tag 1}") == true
                && tagError?.codingPath.contains(" more levels)…{$tag 1}") == true, "\(String(describing: tagError))")
        #expect((tagError?.codingPath.count ?? .max) < 200)
        // Sixteen steps are shown whole; a long member name is cut, saying so.
        let sixteen = #"{"a":"# + String(repeating: "[", count: 15) + "1e400" + String(repeating: "]", count: 15) + "}"
        #expect(
            expectCBORError(.invalidJSON) { _ = try CBORValue(json: sixteen) }?.codingPath == "a"
                + String(repeating: "[0]", count: 15))
        let long = String(repeating: "n", count: 100)
        let named = expectCBORError(.invalidJSON) { _ = try CBORValue(json: #"{"\#(long)":{"x":1e400}}"#) }
        #expect(named?.codingPath == String(repeating: "n", count: 64) + "….x", "\(String(describing: named))")
        // Codable decoding errors are shortened the same way.
        struct Deep: Decodable { var v: [[[[[[[[[[[[[[[[[[Int]]]]]]]]]]]]]]]]]] }
        let cbor = CBORValue.map([
            CBORMapEntry(
                key: "v", value: (0..<17).reduce(CBORValue.array([.text("x")])) { inner, _ in .array([inner]) })
        ]).encoded()
        let decoding = expectCBORError { _ = try CBORDecoder().decode(Deep.self, from: cbor) }
        #expect(decoding?.codingPath.contains("…(") == true, "\(String(describing: decoding))")
    }

    @Test func malformedWrappersAreRefusedNamingWhereTheyAre() throws {
        let cases = [
            #"{"a":{"$bytes":"AAE"}}"#, #"{"a":{"$bytes":"AAF="}}"#, #"{"a":{"$bytes":1}}"#,
            #"{"a":{"$float":"inf"}}"#, #"{"a":{"$tag":-1,"$value":1}}"#, #"{"a":{"$tag":1}}"#,
            #"{"a":{"$simple":21}}"#, #"{"a":{"$simple":300}}"#, #"{"a":{"$map":[[1]]}}"#,
            #"{"a":{"$map":[[1,2],[1,3]]}}"#, #"{"a":{"$unknown":1}}"#, #"{"a":{"$bytes":"","$float":"NaN"}}"#,
        ]
        for json in cases {
            let error = expectCBORError(.invalidJSON) { _ = try CBORValue(exactJSON: json) }
            #expect(error?.codingPath.hasPrefix("a") == true, "\(json): \(String(describing: error))")
        }
        // Plain JSON has no wrappers: the same text is an ordinary map there.
        #expect(try CBORValue(json: #"{"$bytes":"AA=="}"#) == ["$bytes": "AA=="])
    }
}
