import BuriText
import Testing

@Suite("Tokenizer v1: CJK runs become overlapping bigrams")
struct CJKTests {
    @Test func chineseRunsBecomeBigrams() {
        #expect(described("北京大学") == ["北京@0", "京大@1", "大学@2"])
        #expect(
            described("我爱北京天安门。你好") == [
                "我爱@0", "爱北@1", "北京@2", "京天@3", "天安@4", "安门@5", "你好@6",
            ])
    }

    @Test func aRunOfOneEmitsThatCharacter() {
        #expect(described("猫") == ["猫@0"])
        #expect(described("猫，狗 鱼") == ["猫@0", "狗@1", "鱼@2"])
    }

    @Test func japaneseKanaAndHanFormOneRun() {
        #expect(terms("日本語のテキスト") == ["日本", "本語", "語の", "のテ", "テキ", "キス", "スト"])
        #expect(terms("コーヒーを飲む") == ["コー", "ーヒ", "ヒー", "ーを", "を飲", "飲む"])
        #expect(terms("東京・大阪") == ["東京", "大阪"])  // the middle dot is punctuation
        #expect(terms("々") == ["々"])
    }

    @Test func koreanSyllablesBecomeBigrams() {
        #expect(described("한국어 사전") == ["한국@0", "국어@1", "사전@2"])
    }

    @Test func latinLettersNextToARunEndIt() {
        #expect(described("iPhone手机") == ["iphone@0", "手机@1"])
        #expect(described("手机iPhone") == ["手机@0", "iphone@1"])
        #expect(described("用Swift写的程序") == ["用@0", "swift@1", "写的@2", "的程@3", "程序@4"])
        #expect(described("第3章") == ["第@0", "3@1", "章@2"])
        #expect(described("Ａ東京") == ["ａ@0", "東京@1"])
    }

    @Test func diacriticsInsideARunAreTransparent() {
        #expect(terms("北\u{301}京") == ["北京"])
        #expect(terms("北\u{20DD}京\u{FE0F}") == ["北京"])
    }

    @Test func aKanaAndItsVoicingMarkAreOneUnitOfABigram() {
        let nfc = "\u{304C}\u{3063}\u{3053}\u{3046}"  // がっこう
        let nfd = "\u{304B}\u{3099}\u{3063}\u{3053}\u{3046}"
        #expect(described(nfc) == ["\u{304B}\u{3099}\u{3063}@0", "\u{3063}\u{3053}@1", "\u{3053}\u{3046}@2"])
        #expect(described(nfd) == described(nfc))
        // The mark belongs to the second unit of a bigram as well, and to a run's only unit.
        #expect(terms("ちが") == ["\u{3061}\u{304B}\u{3099}"])
        #expect(terms("ち\u{304B}\u{3099}") == ["\u{3061}\u{304B}\u{3099}"])
        #expect(terms("パン") == ["\u{30CF}\u{309A}\u{30F3}"])
        #expect(terms("が") == ["\u{304B}\u{3099}"])
        #expect(terms("ガギグ") == ["\u{30AB}\u{3099}\u{30AD}\u{3099}", "\u{30AD}\u{3099}\u{30AF}\u{3099}"])
        #expect(terms("ガギグ") == terms("\u{30AB}\u{3099}\u{30AD}\u{3099}\u{30AF}\u{3099}"))
        #expect(terms("がき") != terms("かき"))
    }

    @Test func keptMarksOfAUnitAreInCanonicalOrder() {
        // が with an ideographic tone mark (class 218) after it: NFD puts U+3099 (class 8) first.
        let expected = ["\u{304B}\u{3099}\u{302A}\u{304D}"]
        #expect(terms("\u{304C}\u{302A}\u{304D}") == expected)
        #expect(terms("\u{304B}\u{302A}\u{3099}\u{304D}") == expected)
        #expect(terms("\u{304B}\u{3099}\u{302A}\u{304D}") == expected)
    }

    @Test func longRunsGiveEveryBigram() {
        // Far longer than the scanner's buffer, with units of 3, 4 and (with marks) 6 or 9 bytes.
        let units = (0..<2000).map { index -> String in
            switch index % 5 {
            case 0: "\u{304B}\u{3099}"
            case 1: "\u{20000}"
            case 2: "\u{30CF}\u{309A}\u{302A}"
            default: String(UnicodeScalar(0x4E00 + UInt32(index))!)
            }
        }
        let expected = zip(units, units.dropFirst()).map { $0 + $1 }
        #expect(terms(units.joined()) == expected)
        #expect(TextTokenizer.v1.tokens(in: units.joined()).map(\.position) == Array(0..<1999))
        let precomposed = units.map { $0 == "\u{304B}\u{3099}" ? "\u{304C}" : $0 }.joined()
        #expect(Array(precomposed.utf8) != Array(units.joined().utf8))
        #expect(terms(precomposed) == expected)
    }

    @Test func aKeptMarkAfterAJamoStopsItsComposition() {
        // NFC does not compose a jamo across a mark, and neither do runs: ᄀ〮ᅡ stays two units.
        #expect(terms("\u{1100}\u{302E}\u{1161}") == ["\u{1100}\u{302E}\u{1161}"])
        #expect(terms("\u{AC00}\u{302E}") == terms("\u{1100}\u{1161}\u{302E}"))
        #expect(terms("\u{AC00}\u{302E}") == ["\u{AC00}\u{302E}"])
    }

    @Test func hangulInNfdFormsTheSameBigrams() {
        let nfc = "\u{D55C}\u{AD6D}\u{C5B4}"
        let nfd = "\u{1112}\u{1161}\u{11AB}\u{1100}\u{116E}\u{11A8}\u{110B}\u{1165}"
        #expect(terms(nfd) == ["한국", "국어"])
        #expect(TextTokenizer.v1.tokens(in: nfd) == TextTokenizer.v1.tokens(in: nfc))
    }

    @Test func compatibilityIdeographsJoinRunsAsTheirUnifiedForm() {
        #expect(terms("\u{F900}\u{4E00}") == terms("\u{8C48}\u{4E00}"))
    }

    @Test func extensionBIdeographsAreHan() {
        #expect(described("\u{20000}\u{20001}a") == ["\u{20000}\u{20001}@0", "a@1"])
    }

    @Test func bigramsOfAPhraseAreConsecutive() {
        let text = TextTokenizer.v1.tokens(in: "我在北京大学读书")
        let query = TextTokenizer.v1.foldedTerms("北京大学")
        #expect(query.map { String(decoding: $0, as: UTF8.self) } == ["北京", "京大", "大学"])
        let start = text.firstIndex { $0.term == query[0] }
        #expect(start.map { Array(text[$0..<$0 + query.count].map(\.term)) } == query)
        #expect(start.map { text[$0].position } == 2)
    }
}
