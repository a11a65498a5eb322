import Buri
import BuriCodec
import BuriStorage
import Foundation
import LevelDB
import Testing

@Suite("Schema lines and records are read strictly: a wrong member is refused, never defaulted")
struct StrictSchemaLineTests {
    static let index =
        #"{"name":"e","kinds":["binary"],"unique":true,"multiValued":false,"version":0,"fields":["e"],"fieldForms":null,"computed":false}"#

    static func dump(
        schema: String, index: String = index, record: String = #"{"bucket":"B","key":"k","object":{"id":"k","e":"x"}}"#
    ) -> String {
        let schemaText = schema.replacingOccurrences(of: "INDEX", with: index)
        return #"["buri-export",3]"# + "\n" + #"{"bucket":"B","schema":"# + schemaText + "}\n" + record + "\n"
    }

    static let schema = #"{"keyField":"id","schemaVersion":0,"indexes":[INDEX]}"#

    /// (what, the index object or schema changed, the member the error must name)
    static let badIndexes: [(String, String)] = [
        (#""unique":1"#, "unique"), (#""unique":"yes""#, "unique"), (#""unique":null"#, "unique"),
        (#""unique":0"#, "unique"),
        (#""multiValued":1"#, "multiValued"), (#""multiValued":null"#, "multiValued"),
        (#""computed":"no""#, "computed"), (#""computed":null"#, "computed"),
        (#""version":9223372036854775808"#, "version"), (#""version":1.5"#, "version"), (#""version":"3""#, "version"),
        (#""version":true"#, "version"), (#""version":null"#, "version"),
        (#""version":-9223372036854775809"#, "version"),
        (#""kinds":[]"#, "kinds"), (#""kinds":["text"]"#, "kinds"), (#""kinds":"binary""#, "kinds"),
        (#""kinds":[1]"#, "kinds"),
        (#""fields":"e""#, "fields"), (#""fields":[1]"#, "fields"), (#""fields":["e","f"]"#, "fields"),
        (#""fieldForms":["when"]"#, "fieldForms"), (#""fieldForms":"date""#, "fieldForms"),
        (#""fieldForms":["value","date"]"#, "fieldForms"),
        (#""name":"""#, "name"), (#""name":5"#, "name"), (#""name":null"#, "name"),
    ]

    static func replacing(_ member: String, in object: String) -> String {
        let name = String(member.split(separator: ":", maxSplits: 1)[0])
        guard let range = object.range(of: name + ":") else { return object }
        let rest = object[range.upperBound...]
        // The old value runs to the next ',"' or the closing brace.
        let end = rest.range(of: ",\"")?.lowerBound ?? rest.index(before: rest.endIndex)
        return object.replacingCharacters(in: range.lowerBound..<end, with: member)
    }

    @Test func everyWrongIndexMemberIsRefusedNamingLineAndMember() throws {
        let sandbox = try Sandbox()
        for (member, name) in Self.badIndexes {
            let index = Self.replacing(member, in: Self.index)
            #expect(index != Self.index, "\(member)")
            let dump = Self.dump(schema: Self.schema, index: index)
            let restore = try buri(["restore", sandbox.path("r.buri")], stdin: dump)
            expectFailure(restore, status: 7, mentioning: ["line 2", "\"\(name)\"", "nothing was restored"])
            #expect(!sandbox.exists("r.buri"), "\(member)")
            let importing = try buri(["import", sandbox.path("i.buri"), "B"], stdin: dump)
            expectFailure(importing, status: 7, mentioning: ["line 2", "\"\(name)\"", "nothing was imported"])
            #expect(!sandbox.exists("i.buri"), "\(member)")
        }
        // The unchanged line restores, its unique index kept.
        let good = try buri(["restore", sandbox.path("ok.buri")], stdin: Self.dump(schema: Self.schema))
        #expect(good.status == 0, "\(good)")
        #expect(try buri("info", sandbox.path("ok.buri")).stdout.contains("unique"))
    }

    @Test func everyWrongSchemaOrLineMemberIsRefusedNamingIt() throws {
        let sandbox = try Sandbox()
        let cases: [(String, String, String)] = [
            (#"{"keyField":5,"schemaVersion":0,"indexes":[]}"#, Self.index, "keyField"),
            (#"{"keyField":"id","schemaVersion":-1,"indexes":[]}"#, Self.index, "schemaVersion"),
            (#"{"keyField":"id","schemaVersion":1.5,"indexes":[]}"#, Self.index, "schemaVersion"),
            (#"{"keyField":"id","schemaVersion":"3","indexes":[]}"#, Self.index, "schemaVersion"),
            (#"{"keyField":"id","schemaVersion":18446744073709551616,"indexes":[]}"#, Self.index, "schemaVersion"),
            (#"{"keyField":"id","schemaVersion":0,"indexes":{}}"#, Self.index, "indexes"),
            (#"{"keyField":"id","schemaVersion":0}"#, Self.index, "indexes"),
            (#"{"keyField":"id","schemaVersion":0,"indexes":[],"uniqe":true}"#, Self.index, "uniqe"),
            (#"[]"#, Self.index, "keyField"),
            (
                Self.schema,
                #"{"name":"e","kinds":["binary"],"unique":true,"multiValued":false,"version":0,"fields":["e"],"fieldForms":null,"computed":false,"uniqe":false}"#,
                "uniqe"
            ),
            (
                Self.schema,
                #"{"name":"e","kinds":["binary"],"multiValued":false,"version":0,"fields":["e"],"fieldForms":null,"computed":false}"#,
                "unique"
            ),
            (
                Self.schema,
                #"{"name":"e","kinds":["binary"],"unique":true,"multiValued":false,"version":0,"fields":null,"fieldForms":null,"computed":false,"fieldPaths":[[]]}"#,
                "fieldPaths"
            ),
            (
                Self.schema,
                #"{"name":"e","kinds":["binary"],"unique":true,"multiValued":false,"version":0,"fields":null,"fieldForms":null,"computed":false,"fieldPaths":[["a"],["b"]]}"#,
                "fieldPaths"
            ),
            (#"{"keyField":"id","schemaVersion":0,"indexes":[INDEX,INDEX]}"#, Self.index, "same name"),
        ]
        for (schema, index, name) in cases {
            let dump = Self.dump(schema: schema, index: index)
            let restore = try buri(["restore", sandbox.path("r.buri")], stdin: dump)
            expectFailure(restore, status: 7, mentioning: ["line 2", name])
            let importing = try buri(["import", sandbox.path("i.buri"), "B"], stdin: dump)
            expectFailure(importing, status: 7, mentioning: ["line 2", name])
        }
        // Records and schema lines with a wrong or unknown member.
        let records: [(String, String)] = [
            (#"{"bucket":"B","key":5,"object":{}}"#, "\"key\""),
            (#"{"bucket":"B","key":"k","object":{},"extra":1}"#, "\"extra\""),
            (#"{"bucket":"B","key":"k"}"#, "\"object\""),
            (#"{"bucket":"B","key":"k","object":{"id":"k"},"indexValues":{}}"#, "\"indexValues\""),
            (#"{"bucket":5,"key":"k","object":{}}"#, "\"bucket\""),
        ]
        for (record, name) in records {
            let dump = Self.dump(schema: Self.schema, record: record)
            expectFailure(
                try buri(["restore", sandbox.path("r.buri")], stdin: dump), status: 7, mentioning: ["line 3", name])
            expectFailure(
                try buri(["import", sandbox.path("i.buri"), "B"], stdin: dump), status: 7, mentioning: ["line 3", name])
        }
        let extra =
            #"["buri-export",3]"# + "\n"
            + #"{"bucket":"B","schema":{"keyField":"id","schemaVersion":0,"indexes":[]},"more":1}"# + "\n"
        expectFailure(
            try buri(["restore", sandbox.path("r.buri")], stdin: extra), status: 7, mentioning: ["line 2", "\"more\""])
    }

    /// A catalog entry whose fields do not match its kinds is described as such, not as an index
    /// that "names no field".
    @Test func mismatchedFieldCountsAreNamedAsSuch() throws {
        var index = IndexDefinition(id: 1, name: "pair", components: [.binary, .numeric])
        index.fields = ["a"]
        #expect(
            index.uncomputableReason?.contains("1 field for 2 components") == true,
            "\(index.uncomputableReason ?? "nil")")
        #expect(index.uncomputableReason?.contains("names no field") == false)
        index.fields = nil
        #expect(index.uncomputableReason?.contains("names no field") == true)
    }
}
