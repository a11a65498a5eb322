import BuriCodec
import Foundation
import Testing

@Suite("The JSON bridge is exact and stable")
struct JSONBridgeTests {
    @Test func exportFollowsTheRules() {
        let value: CBORValue = [
            "int": 42, "neg": -7, "big": .unsigned(.max), "min": .negative(.max), "beyond53": .unsigned((1 << 53) + 1),
            "floats": [
                1.0, 0.1, 1e100, 1e-7, -0.0, .float(.leastNonzeroMagnitude), .float(.nan), .float(.infinity),
                .float(-.infinity),
            ],
            "bytes": .bytes([0, 1, 2, 254, 255]), "tag": .tagged(32, "https://x"), "undef": .undefined,
            "simple": .simple(99),
            "flags": [true, false, nil], "empty": [:], "none": [],
        ]
        #expect(
            value.jsonString() == """
                {"int":42,"neg":-7,"big":18446744073709551615,"min":-18446744073709551616,"beyond53":9007199254740993,\
                "floats":[1.0,0.1,1e+100,1e-07,-0.0,5e-324,"NaN","Infinity","-Infinity"],"bytes":"AAEC/v8=",\
                "tag":"https://x","undef":null,"simple":null,"flags":[true,false,null],"empty":{},"none":[]}
                """)
    }

    @Test func textIsEscapedPerRFC8259() {
        let value = CBORValue.text("q\"b\\s/\u{0}\u{1}\u{1F}\n\t\r\u{8}\u{C}é😀\u{7F}")
        #expect(value.jsonString() == #""q\"b\\s/\u0000\u0001\u001f\n\t\r\b\fé😀\#u{7F}""#)
    }

    @Test func nonTextKeysBecomeTheirJSONText() {
        let value: CBORValue = [
            1: "a", -2: "b", .bytes([1]): "c", [1, 2]: "d", 1.5: "e", .float(.nan): "f", true: "g",
            .tagged(1, "t"): "h",
        ]
        #expect(
            value.jsonString() == #"{"1":"a","-2":"b","AQ==":"c","[1,2]":"d","1.5":"e","NaN":"f","true":"g","t":"h"}"#)
    }

    @Test func keysNestedInKeysStayLinear() {
        // Each level would escape the one inside it again and double the output.
        var value: CBORValue = ["leaf": "\"quoted\""]
        for _ in 0..<60 { value = .map([CBORMapEntry(key: value, value: 0)]) }
        let json = value.jsonString()
        #expect(json.utf8.count < 4_000)
        #expect(throws: Never.self) { try CBORValue(json: json) }
        // One level of container keys is still plain JSON text.
        let one: CBORValue = [["a": 1]: true]
        #expect(one.jsonString() == #"{"{\"a\":1}":true}"#)
    }

    @Test func prettyOutputIsIndentedAndStable() {
        let value: CBORValue = ["a": [1, ["b": nil]], "c": [:], "d": []]
        #expect(
            value.jsonString(pretty: true) == """
                {
                  "a": [
                    1,
                    {
                      "b": null
                    }
                  ],
                  "c": {},
                  "d": []
                }
                """)
    }

    @Test func importParsesNumbersStringsAndOrder() throws {
        let value = try CBORValue(
            json: """
                \u{FEFF}{ "z": 1, "a": -1, "n": 0, "m": -0, "big": 18446744073709551615, "min": -18446744073709551616,
                  "approx": 1.8446744073709552e19, "f": 2.50, "e": 1E3, "s": "\\u00e9\\ud83d\\ude00\\/\\n",
                  "list": [true, false, null, {}, []] }
                """)
        #expect(
            value == [
                "z": 1, "a": -1, "n": 0, "m": 0, "big": .unsigned(.max), "min": .negative(.max),
                "approx": .float(18446744073709551616.0), "f": 2.5, "e": 1000.0, "s": "é😀/\n",
                "list": [true, false, nil, [:], []],
            ])
    }

    @Test func exportImportExportIsByteIdentical() throws {
        let tricky: [CBORValue] = [
            [
                "ints": [0, -1, .unsigned(.max), .negative(.max), .unsigned(1 << 53 + 1)],
                "floats": [
                    20.0, 0.1, 1e21, 1e-5, -0.0, .float(Double(Float(0.1))), .float(.greatestFiniteMagnitude),
                    .float(.leastNonzeroMagnitude), .float(.nan), .float(-.infinity), 123456789.125,
                ],
                "text": ["", "\u{0}", "\"\\", "日本", "👩‍👩‍👧", "\u{1F}\u{7F}"],
                "bytes": [.bytes([]), .bytes([0xFF]), .bytes(Array(0...255))],
                "misc": [.tagged(1, 1.5), .undefined, .simple(7), nil, true],
                "keys": [1: 1, .bytes([9]): 2, [1]: 3, "": 4],
            ],
            try CBORValue(decoding: try CBOREncoder().encode(samplePerson)),
            try CBORValue(decoding: try CBOREncoder().encode(AllIntegers.min)),
            1.0, "just text", [],
        ]
        for value in tricky {
            for pretty in [false, true] {
                let first = value.jsonString(pretty: pretty)
                let imported = try CBORValue(json: first)
                #expect(imported.jsonString(pretty: pretty) == first)
                // And through CBOR bytes, as the CLI stores it.
                let stored = try CBORValue(decoding: imported.encoded())
                #expect(stored.jsonString(pretty: pretty) == first)
            }
        }
    }

    @Test func codableValuesSurviveTheJSONDetour() throws {
        struct Record: Codable, Equatable {
            var id: UUID
            var when: Date
            var ratio: Float
            var precise: Double
            var count: Int
            var blob: Data
            var link: URL
            var shape: Shape
            var level: UInt8
            var maybe: String?
        }
        let record = Record(
            id: UUID(), when: Date(timeIntervalSinceReferenceDate: 1234.5), ratio: 0.1, precise: .pi, count: -3,
            blob: Data([1, 2, 3]), link: URL(string: "https://buri.dev/x")!, shape: .rectangle(2, 3), level: 200,
            maybe: nil)
        let exported = try CBORValue(decoding: try CBOREncoder().encode(record)).exactJSONString()
        let imported = try CBORValue(exactJSON: exported)
        #expect(try CBORDecoder().decode(Record.self, from: imported.encoded()) == record)
        // An integral float written by hand reads into an Int field, and a NaN string into a Double.
        let edited = try CBORValue(exactJSON: exported.replacingOccurrences(of: #""count":-3"#, with: #""count":20.0"#))
        #expect(try CBORDecoder().decode(Record.self, from: edited.encoded()).count == 20)
        let nan = try CBORValue(json: #"{"values": [1, "NaN", 2.5]}"#)
        struct Values: Codable { var values: [Double] }
        #expect(try CBORDecoder().decode(Values.self, from: nan.encoded()).values[1].isNaN)
    }

    @Test func parseErrorsGiveLineAndColumn() throws {
        let cases: [(String, Int, Int)] = [
            ("", 1, 1),
            ("{\n  \"a\": 1,\n  \"b\": tru\n}", 3, 8),
            ("[1, 2,]", 1, 7),
            ("{\"a\" 1}", 1, 6),
            ("{\"a\": 1,}", 1, 9),
            ("\"unterminated", 1, 1),
            ("[01]", 1, 2),
            ("[1.]", 1, 4),
            ("[-]", 1, 2),
            ("\"\\ud800\"", 1, 2),
            ("\"\\x\"", 1, 2),
            ("\"tab\there\"", 1, 5),
            ("1 2", 1, 3),
            ("{\"é\": @}", 1, 7),
            ("nul", 1, 1),
        ]
        for (json, line, column) in cases {
            let error = expectCBORError(.invalidJSON) { _ = try CBORValue(json: json) }
            #expect(
                error?.line == line && error?.column == column, "\(json.debugDescription): \(String(describing: error))"
            )
        }
        expectCBORError(.invalidJSON) { _ = try CBORValue(jsonBytes: [0x22, 0xC3, 0x28, 0x22]) }
        #expect(try CBORValue(jsonBytes: Array("[1]".utf8)) == [1])
    }

    @Test func deepJSONIsRejected() throws {
        let deep = String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)
        expectCBORError(.invalidJSON) { _ = try CBORValue(json: deep) }
        let ok = String(repeating: "[", count: 500) + String(repeating: "]", count: 500)
        #expect(try CBORValue(json: ok).jsonString() == ok)
    }
}
