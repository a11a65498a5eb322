import Buri
import BuriEncryption
import BuriTestBasics
import Testing

@Suite("Sealing and opening: round trips, fresh nonces per seal, sessions per instance, tokens")
struct CipherTests {
    let key = DatabaseKey.random()
    let header: [UInt8]

    init() throws {
        header = try key.newHeader()
    }

    @Test func roundTripsOfEveryShape() throws {
        let cipher = try key.unlock(header: header)
        var random = SeededGenerator(seed: 7)
        let mebibyte = (0..<(1 << 20)).map { _ in UInt8.random(in: 0...255, using: &random) }
        let plaintexts: [[UInt8]] = [[], [0x42], [0, 0, 0, 1, 0, 0], Array("plain text".utf8), mebibyte]
        for plaintext in plaintexts {
            for associatedData: [UInt8] in [[], [0], Array("bucket\u{0}key".utf8)] {
                let sealed = cipher.seal(plaintext, associatedData)
                #expect(sealed.count == plaintext.count + 41)
                #expect(sealed.first == sealedValueMarker)
                #expect(try cipher.open(sealed, associatedData) == plaintext)
            }
        }
    }

    @Test func theCiphertextHidesThePlaintext() throws {
        let cipher = try key.unlock(header: header)
        let plaintext = [UInt8](repeating: 0x41, count: 64)
        let sealed = cipher.seal(plaintext)
        #expect(Array(sealed[25..<(25 + 64)]) != plaintext)
        #expect(sealed.count(where: { $0 == 0x41 }) < 16)
    }

    @Test func everySealHasANewNonce() throws {
        let cipher = try key.unlock(header: header)
        let plaintext = Array("the same value".utf8)
        let first = cipher.seal(plaintext)
        let second = cipher.seal(plaintext)
        #expect(first != second)
        #expect(sessionID(of: first) == sessionID(of: second))
        #expect(counter(of: first) == 0)
        #expect(counter(of: second) == 1)
        #expect(Array(first[25...]) != Array(second[25...]))
        #expect(try cipher.open(first) == plaintext)
        #expect(try cipher.open(second) == plaintext)
    }

    @Test func anotherInstanceHasItsOwnSessionAndOpensTheFirstsValues() throws {
        let first = try key.unlock(header: header)
        let second = try key.unlock(header: header)
        let a = first.seal(Array("from the first process".utf8), [1])
        let b = second.seal(Array("from the second process".utf8), [2])
        #expect(sessionID(of: a) != sessionID(of: b))
        #expect(counter(of: a) == 0 && counter(of: b) == 0)
        #expect(try second.open(a, [1]) == Array("from the first process".utf8))
        #expect(try first.open(b, [2]) == Array("from the second process".utf8))
        // A third process reading both: each other session's key is derived and cached.
        let third = try key.unlock(header: header)
        for _ in 0..<3 {
            #expect(try third.open(a, [1]) == Array("from the first process".utf8))
            #expect(try third.open(b, [2]) == Array("from the second process".utf8))
        }
    }

    @Test func aReaderMeetingManySessionsOpensThemAll() throws {
        // More sessions than the cache holds (1,024): the cache starts over and still opens all.
        let reader = try key.unlock(header: header)
        var sealed: [[UInt8]] = []
        for index in 0..<1100 {
            let writer = try key.unlock(header: header)
            sealed.append(writer.seal([UInt8(index & 0xFF), UInt8(index >> 8)]))
        }
        var unopened = 0
        for _ in 0..<2 {
            for (index, value) in sealed.enumerated()
            where (try? reader.open(value)) != [UInt8(index & 0xFF), UInt8(index >> 8)] {
                unopened += 1
            }
        }
        #expect(unopened == 0)
        #expect(Set(sealed.map(sessionID(of:))).count == 1100)
    }

    @Test func aCounterAboutToReachItsLastValueStartsANewSession() throws {
        let cipher = try key.unlockCipher(header: header, firstCounter: UInt64.max - 1)
        let firstSession = cipher.sessionID
        let last = cipher.seal(Array("last of the session".utf8))
        #expect(counter(of: last) == UInt64.max - 1)
        #expect(sessionID(of: last) == firstSession)

        let next = cipher.seal(Array("first of the next".utf8))
        #expect(counter(of: next) == 0)
        #expect(sessionID(of: next) != firstSession)
        #expect(cipher.sessionID == sessionID(of: next))
        let after = cipher.seal(Array("second of the next".utf8))
        #expect(counter(of: after) == 1)
        #expect(sessionID(of: after) == sessionID(of: next))

        // Values of the old session still open, in this instance and in another.
        let other = try key.unlock(header: header)
        for opener in [cipher as any DatabaseCipher, other] {
            #expect(try opener.open(last) == Array("last of the session".utf8))
            #expect(try opener.open(next) == Array("first of the next".utf8))
            #expect(try opener.open(after) == Array("second of the next".utf8))
        }
    }

    @Test func concurrentSealsNeverShareANonce() async throws {
        let cipher = try key.unlock(header: header)
        // Each task seals 1,000 values of its own, bound to its number as associated data.
        let sealed = await withTaskGroup(of: [(task: UInt8, plaintext: [UInt8], sealed: [UInt8])].self) { group in
            for task in UInt8(0)..<4 {
                group.addTask {
                    (0..<1000).map { index in
                        let plaintext = [task, UInt8(index & 0xFF), UInt8(index >> 8)]
                        return (task, plaintext, cipher.seal(plaintext, [task]))
                    }
                }
            }
            var all: [(task: UInt8, plaintext: [UInt8], sealed: [UInt8])] = []
            for await values in group { all += values }
            return all
        }
        #expect(sealed.count == 4000)
        #expect(Set(sealed.map { nonce(of: $0.sealed) }).count == 4000)
        #expect(Set(sealed.map { counter(of: $0.sealed) }) == Set(0..<4000))
        let unopened = sealed.filter { (try? cipher.open($0.sealed, [$0.task])) != $0.plaintext }
        #expect(unopened.isEmpty)
    }

    @Test func tokensAreKeyedAndDeterministic() throws {
        let cipher = try key.unlock(header: header)
        let again = try key.unlock(header: header)
        let input = Array("alice@example.com".utf8)
        let token = cipher.token(input)
        #expect(token.count == 16)
        #expect(cipher.token(input) == token)
        #expect(again.token(input) == token)
        #expect(cipher.token(Array("alice@example.org".utf8)) != token)
        #expect(cipher.token([]).count == 16)
        #expect(cipher.token([]) != cipher.token([0]))

        let otherKey = DatabaseKey.random()
        let other = try otherKey.unlock(header: try otherKey.newHeader())
        #expect(other.token(input) != token)
        // The same key in another database (another salt) makes other tokens too.
        let otherDatabase = try key.unlock(header: try key.newHeader())
        #expect(otherDatabase.token(input) != token)
    }

    @Test func theCipherShowsNoKey() throws {
        let cipher = try key.unlock(header: header)
        #expect(String(describing: cipher) == "SealingCipher(AES-256-GCM, redacted)")
        var dumped = ""
        dump(cipher, to: &dumped)
        #expect(!dumped.contains("SymmetricKey"))
    }
}
