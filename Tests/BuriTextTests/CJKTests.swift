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

    @Test func marksInsideARunAreTransparent() {
        #expect(terms("北\u{301}京") == ["北京"])
        #expect(terms("か\u{3099}き") == terms("がき"))
        #expect(terms("がき") == ["かき"])
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
