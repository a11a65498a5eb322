import Buri
import BuriStorage
import Foundation
import Testing

/// A struct an app keeps as a named value.
private struct Settings: Codable, Equatable {
    var theme: String
    var fontSize: Int
}

@Suite("buri values, get-value and set-value; named values in export and restore")
struct ValueToolTests {
    /// The fixture with three named values: a date, a struct, and a name canonically equal to another.
    static func fixtureWithValues(_ sandbox: Sandbox) throws -> String {
        let path = try makeFixture(sandbox)
        let db = try BuriDatabase(path: path)
        defer { db.close() }
        try db.values.set(Date(timeIntervalSince1970: 1_700_000_000), for: "lastSync")
        try db.values.set(Settings(theme: "dark", fontSize: 14), for: "settings")
        try db.values.set(1, for: "caf\u{E9}")
        try db.values.set(2, for: "cafe\u{301}")
        return path
    }

    @Test func valuesListsTheNamesInBytewiseOrder() throws {
        let sandbox = try Sandbox()
        let db = try Self.fixtureWithValues(sandbox)
        let run = try buri("values", db)
        expectSuccess(run)
        #expect(run.lines == ["cafe\u{301}", "caf\u{E9}", "lastSync", "settings"])
        #expect(Array(run.stdout.utf8).starts(with: Array("cafe\u{301}\ncaf\u{E9}\n".utf8)))
        let json = try buri("values", db, "--json")
        expectSuccess(json)
        #expect(json.stdout == "[\"cafe\u{301}\",\"caf\u{E9}\",\"lastSync\",\"settings\"]\n")
        // An empty database lists nothing.
        let empty = try makeFixture(sandbox, name: "empty.buri")
        #expect(try buri("values", empty).stdout == "")
        #expect(try buri("values", empty, "--json").stdout == "[]\n")
    }

    @Test func getValuePrintsJSONAndTheExportLine() throws {
        let sandbox = try Sandbox()
        let db = try Self.fixtureWithValues(sandbox)
        let settings = try buri("get-value", db, "settings")
        expectSuccess(settings)
        let decoded = try JSONSerialization.jsonObject(with: Data(settings.stdout.utf8)) as? [String: Any]
        #expect(decoded?["theme"] as? String == "dark" && decoded?["fontSize"] as? Int == 14, "\(settings)")
        let line = try buri("get-value", db, "lastSync", "--json")
        expectSuccess(line)
        #expect(line.stdout == #"{"value":"lastSync","data":{"$tag":1,"$value":1700000000}}"# + "\n")
        // Byte-different names are different values.
        #expect(try buri("get-value", db, "caf\u{E9}").stdout == "1\n")
        #expect(try buri("get-value", db, "cafe\u{301}").stdout == "2\n")
    }

    @Test func aMissingNameExitsWithSixAndADamagedValueWithThree() throws {
        let sandbox = try Sandbox()
        let path = try Self.fixtureWithValues(sandbox)
        expectFailure(
            try buri("get-value", path, "nope"), status: 6, mentioning: ["no named value 'nope'", "buri values"])
        expectFailure(try buri("get-value", path, ""), status: 2, mentioning: ["1 to 1024 bytes"])
        // A value damaged behind Buri's back.
        let engine = try LevelDBEngine(path: path, options: .buriDefaults)
        let batch = engine.makeBatch()
        batch.put([0x06] + Array("broken".utf8), [0xa1, 0x61])
        try engine.commit(batch, conditions: nil, sync: true)
        engine.close()
        expectFailure(try buri("get-value", path, "broken"), status: 3, mentioning: ["'broken'", "damaged"])
        let check = try buri("check", path)
        #expect(check.status == 1, "\(check)")
        #expect(check.stdout.contains("corruptValue") && check.stdout.contains("'broken'"), "\(check)")
        // Repair never deletes it.
        _ = try buri("check", path, "--repair")
        #expect(try buri("values", path).lines.contains("broken"))
        // Export refuses it, or skips it when asked.
        expectFailure(try buri("export", path), status: 3, mentioning: ["\"broken\"", "not valid CBOR"])
    }

    @Test func setValueStoresExactJSONThatTheAppReads() throws {
        let sandbox = try Sandbox()
        let path = try makeFixture(sandbox)
        let stored = try buri("set-value", path, "settings", #"{"theme":"light","fontSize":12}"#)
        expectSuccess(stored)
        #expect(stored.stdout == "stored value 'settings'\n")
        expectSuccess(try buri("set-value", path, "lastSync", #"{"$tag":1,"$value":1700000000}"#))
        let replaced = try buri(
            ["set-value", path, "settings", "--file", "-"], stdin: #"{"theme":"dark","fontSize":14}"#)
        #expect(replaced.stdout == "replaced value 'settings'\n", "\(replaced)")
        expectFailure(try buri("set-value", path, "bad", "{nope"), status: 7, mentioning: ["nothing was stored"])
        expectFailure(
            try buri("set-value", path, "bad", #"{"a":1,"a":2}"#), status: 7, mentioning: ["nothing was stored"])
        let db = try BuriDatabase(path: path)
        defer { db.close() }
        #expect(try db.values.get(Settings.self, for: "settings") == Settings(theme: "dark", fontSize: 14))
        #expect(try db.values.get(Date.self, for: "lastSync") == Date(timeIntervalSince1970: 1_700_000_000))
        #expect(try db.values.names() == ["lastSync", "settings"])
    }

    @Test func exportCarriesTheValuesAndRestoreBringsThemBackByteForByte() throws {
        let sandbox = try Sandbox()
        let path = try Self.fixtureWithValues(sandbox)
        let export = try buri("export", path)
        expectSuccess(export)
        #expect(export.lines.first == #"["buri-export",5]"#)
        #expect(
            Array(export.lines.suffix(4)) == [
                #"{"value":"cafe\#u{301}","data":2}"#, #"{"value":"caf\#u{E9}","data":1}"#,
                #"{"value":"lastSync","data":{"$tag":1,"$value":1700000000}}"#,
                #"{"value":"settings","data":{"theme":"dark","fontSize":14}}"#,
            ])
        let dump = try sandbox.write("dump.jsonl", export.stdout)
        let restored = sandbox.path("restored.buri")
        let restoring = try buri("restore", restored, dump)
        expectSuccess(restoring)
        #expect(restoring.stdout.contains("and 4 named values into"), "\(restoring)")
        let again = try buri("export", restored)
        #expect(again.stdout == export.stdout)
        let db = try BuriDatabase(path: restored)
        defer { db.close() }
        #expect(try db.values.get(Settings.self, for: "settings") == Settings(theme: "dark", fontSize: 14))
        #expect(try db.values.get(Int.self, for: "cafe\u{301}") == 2)
        // An export of named buckets carries no values, and keeps the older format.
        let some = try buri("export", path, "Person")
        #expect(some.lines.first == #"["buri-export",3]"#)
        #expect(!some.stdout.contains(#"{"value":"#))
        // Import of one bucket from an export with values ignores the values.
        #expect(try buri("import", sandbox.path("imported.buri"), "Person", dump).status == 0)
        #expect(try buri("values", sandbox.path("imported.buri")).stdout == "")
    }

    @Test func restoreRefusesMalformedValueLines() throws {
        let sandbox = try Sandbox()
        for (line, mentions) in [
            (#"{"value":"","data":1}"#, ["\"value\""]),
            (#"{"value":1,"data":1}"#, ["\"value\""]),
            (#"{"value":"a"}"#, ["\"data\""]),
            (#"{"value":"a","data":1,"extra":2}"#, ["extra"]),
        ] {
            let run = try buri(["restore", sandbox.path("r.buri")], stdin: #"["buri-export",5]"# + "\n" + line + "\n")
            expectFailure(run, status: 7, mentioning: ["line 2"] + mentions)
            #expect(!sandbox.exists("r.buri"))
        }
        // Value lines are format 5: a format 4 export with one is refused.
        let old = try buri(
            ["restore", sandbox.path("r.buri")], stdin: #"["buri-export",4]"# + "\n" + #"{"value":"a","data":1}"# + "\n"
        )
        expectFailure(old, status: 7, mentioning: ["line 2"])
        // A value given twice: the last wins.
        let twice = try buri(
            ["restore", sandbox.path("t.buri")],
            stdin: #"["buri-export",5]"# + "\n" + #"{"value":"a","data":1}"# + "\n" + #"{"value":"a","data":2}"# + "\n")
        expectSuccess(twice)
        #expect(try buri("get-value", sandbox.path("t.buri"), "a").stdout == "2\n")
    }
}
