import BuriTestSupport
import Testing

@testable import Buri

/// The text segment codec and merge (`docs/FORMAT.md` §5c): what is encoded reads back, a
/// seek lands where a search of the model lands, damaged bytes are refused, and a merge keeps
/// exactly the postings no tombstone cancels.
@Suite struct TextSegmentTests {
    /// A layout-2 entry value: `n` positions in a document of `length` tokens.
    static func value(_ rng: inout SeededGenerator) -> [UInt8] {
        let n = Int.random(in: 1...4, using: &rng)
        var positions: [UInt64] = []
        var at = UInt64.random(in: 0...300, using: &rng)
        for _ in 0..<n {
            positions.append(at)
            at += UInt64.random(in: 1...200, using: &rng)
        }
        var out: [UInt8] = []
        Varint.append(at + UInt64.random(in: 0...5, using: &rng), to: &out)
        out += TextEntries.encodePositions(positions)
        return out
    }

    /// Distinct random keys, sorted as bytes, from a small alphabet (NUL and 0xFF included) so
    /// that keys share long prefixes, one being a prefix of another.
    static func keys(_ count: Int, _ rng: inout SeededGenerator) -> [[UInt8]] {
        let alphabet: [UInt8] = [0x00, 0x01, 0x41, 0x61, 0x62, 0xC3, 0xA9, 0xFF]
        // A third of the keys share a long prefix (14 to 18 bytes, as "python3-…" names do), so
        // that keys tie in their first 16 bytes, or differ only past them, or end inside them.
        let long = Array("python3-modules-".utf8) + [0x00, 0x61]
        var set = Set<[UInt8]>()
        while set.count < count {
            let length = Int.random(in: 1...10, using: &rng)
            var key = (0..<length).map { _ in alphabet.randomElement(using: &rng)! }
            if Int.random(in: 0..<3, using: &rng) == 0 {
                key =
                    Array(long[..<Int.random(in: 14...18, using: &rng)])
                    + key.prefix(Int.random(in: 0...3, using: &rng))
            }
            set.insert(key)
        }
        return set.sorted { $0.lexicographicallyPrecedes($1) }
    }

    static func stamps(_ count: Int, _ rng: inout SeededGenerator) -> [[UInt8]] {
        var set = Set<[UInt8]>()
        while set.count < count { set.insert((0..<16).map { _ in UInt8.random(in: 0...255, using: &rng) }) }
        return set.sorted { $0.lexicographicallyPrecedes($1) }
    }

    /// `stamps` and `postings` with the stamps no posting names left out (a segment lists only
    /// the stamps its postings name).
    static func usedOnly(
        _ stamps: [[UInt8]], _ postings: [TextSegment.Posting]
    ) -> (stamps: [[UInt8]], postings: [TextSegment.Posting]) {
        let used = Set(postings.map(\.stamp)).sorted()
        let index = Dictionary(uniqueKeysWithValues: used.enumerated().map { ($1, $0) })
        return (used.map { stamps[$0] }, postings.map { ($0.key, index[$0.stamp]!, $0.value) })
    }

    /// Every posting of a segment, as ``TextSegment/forEachPosting(_:)`` reads them.
    static func postings(of segment: TextSegment) throws -> [TextSegment.Posting] {
        var read: [TextSegment.Posting] = []
        try segment.forEachPosting { key, stamp, value in read.append((Array(key), stamp, Array(value))) }
        return read
    }

    @Test(arguments: [1, 2, 3, 4, 5]) func readsBackWhatWasWritten(seed: UInt64) throws {
        var rng = SeededGenerator(seed: seed)
        for _ in 0..<40 {
            // Around the restart interval (16) too: the restart table is checked as it is read.
            let count = [1, 2, 15, 16, 17, 33, Int.random(in: 1...300, using: &rng)].randomElement(using: &rng)!
            let keys = Self.keys(count, &rng)
            let (stamps, postings) = Self.usedOnly(
                Self.stamps(3, &rng),
                keys.map { ($0, Int.random(in: 0..<3, using: &rng), Self.value(&rng)) })
            let bytes = try TextSegment.encode(stamps: stamps, postings: postings)
            let segment = try TextSegment(bytes)
            #expect(segment.count == count && segment.stamps == stamps)
            let read = try Self.postings(of: segment)
            #expect(read.map(\.key) == postings.map(\.key))
            #expect(read.map(\.stamp) == postings.map(\.stamp))
            #expect(read.map(\.value) == postings.map(\.value))
        }
    }

    @Test func encodingRefusesWhatWouldNotRead() throws {
        var rng = SeededGenerator(seed: 9)
        let stamp = Self.stamps(1, &rng)
        let value = Self.value(&rng)
        let a: [UInt8] = [0x61]
        let b: [UInt8] = [0x62]
        #expect(throws: FormatError.self) { try TextSegment.encode(stamps: stamp, postings: []) }
        #expect(throws: FormatError.self) {
            try TextSegment.encode(stamps: stamp, postings: [(b, 0, value), (a, 0, value)])
        }
        #expect(throws: FormatError.self) {
            try TextSegment.encode(stamps: stamp, postings: [(a, 0, value), (a, 0, value)])
        }
        #expect(throws: FormatError.self) { try TextSegment.encode(stamps: stamp, postings: [([], 0, value)]) }
        #expect(throws: FormatError.self) { try TextSegment.encode(stamps: stamp, postings: [(a, 1, value)]) }
        #expect(throws: FormatError.self) { try TextSegment.encode(stamps: stamp, postings: [(a, 0, [0x01, 0x00])]) }
        #expect(throws: FormatError.self) { try TextSegment.encode(stamps: [[0x01]], postings: [(a, 0, value)]) }
        let two = Self.stamps(2, &rng)
        #expect(throws: FormatError.self) {
            try TextSegment.encode(stamps: two.reversed(), postings: [(a, 0, value), (b, 1, value)])
        }
        #expect(throws: FormatError.self) { try TextSegment.encode(stamps: two, postings: [(a, 0, value)]) }
        // The writer a flush and a merge use: fewer or more postings than announced are refused,
        // a fault met by `append` is thrown by `finish`, and a writer is reused after one.
        var writer = TextSegmentWriter(validatingValues: true)
        try writer.begin(stamps: stamp, count: 2)
        a.withUnsafeBytes { key in value.withUnsafeBytes { writer.append(key: key, stamp: 0, value: $0) } }
        #expect(throws: FormatError.self) { try writer.finish() }
        try writer.begin(stamps: stamp, count: 1)
        for key in [a, b] {
            key.withUnsafeBytes { key in value.withUnsafeBytes { writer.append(key: key, stamp: 0, value: $0) } }
        }
        #expect(throws: FormatError.self) { try writer.finish() }
        try writer.begin(stamps: stamp, count: 1)
        let bad: [UInt8] = [0x01, 0x00]
        a.withUnsafeBytes { key in bad.withUnsafeBytes { writer.append(key: key, stamp: 0, value: $0) } }
        #expect(throws: FormatError.self) { try writer.finish() }
        try writer.begin(stamps: stamp, count: 1)
        a.withUnsafeBytes { key in value.withUnsafeBytes { writer.append(key: key, stamp: 0, value: $0) } }
        try writer.finish()
        #expect(writer.bytes == (try TextSegment.encode(stamps: stamp, postings: [(a, 0, value)])))
    }

    /// Every truncation is refused; every changed byte is refused or reads as a segment whose
    /// postings all read (never a crash, never a walk past the end).
    @Test func damagedBytesAreRefusedOrReadWhole() throws {
        var rng = SeededGenerator(seed: 21)
        let keys = Self.keys(40, &rng)
        let stamps = Self.stamps(2, &rng)
        let bytes = try TextSegment.encode(
            stamps: stamps, postings: keys.enumerated().map { ($1, $0 % 2, Self.value(&rng)) })
        for length in 0..<bytes.count {
            #expect(throws: FormatError.self) { try TextSegment(Array(bytes[..<length])) }
        }
        #expect(throws: FormatError.self) { try TextSegment(bytes + [0]) }
        var refused = 0
        for position in bytes.indices {
            for flip: UInt8 in [0x01, 0x80, 0xFF] {
                var damaged = bytes
                damaged[position] ^= flip
                guard let segment = try? TextSegment(damaged) else {
                    refused += 1
                    continue
                }
                #expect(try Self.postings(of: segment).count == segment.count)
            }
        }
        #expect(refused > bytes.count)  // most damage is caught
    }

    /// Segments hold every posting an object ever had under one term; tombstones name the
    /// superseded ones. The merge keeps exactly each object's current posting.
    @Test(arguments: [1, 2, 3]) func mergeKeepsExactlyThePostingsNoTombstoneCancels(seed: UInt64) throws {
        var rng = SeededGenerator(seed: seed)
        let objects = Self.keys(120, &rng)
        var live: [[UInt8]: (stamp: [UInt8], value: [UInt8])] = [:]
        var tombstones = Set<TextSegmentMerge.Identity>()
        var segments: [TextSegment] = []
        for _ in 0..<5 {
            // One commit: some objects get a new posting (their old one, if any, is tombstoned),
            // some are deleted (tombstoned only).
            let stamp = Self.stamps(1, &rng)
            var postings: [TextSegment.Posting] = []
            for key in objects where Int.random(in: 0..<3, using: &rng) == 0 {
                if let old = live[key] { tombstones.insert(.init(key: key, stamp: old.stamp)) }
                if Int.random(in: 0..<5, using: &rng) == 0 {
                    live[key] = nil
                } else {
                    let value = Self.value(&rng)
                    postings.append((key, 0, value))
                    live[key] = (stamp[0], value)
                }
            }
            if !postings.isEmpty {
                segments.append(try TextSegment(TextSegment.encode(stamps: stamp, postings: postings)))
            }
        }
        let (merged, used) = try TextSegmentMerge.merge(segments, tombstones: tombstones)
        let expected = live.sorted { $0.key.lexicographicallyPrecedes($1.key) }
        #expect(merged.map(\.key) == expected.map(\.key))
        #expect(merged.map(\.stamp) == expected.map(\.value.stamp))
        #expect(merged.map(\.value) == expected.map(\.value.value))
        #expect(used == tombstones)  // every tombstone cancelled a posting in these segments
        // A merged segment reads as one, with the stamps it keeps.
        let stamps = Array(Set(merged.map(\.stamp))).sorted { $0.lexicographicallyPrecedes($1) }
        if !merged.isEmpty {
            let index = Dictionary(uniqueKeysWithValues: stamps.enumerated().map { ($1, $0) })
            let bytes = try TextSegment.encode(
                stamps: stamps, postings: merged.map { ($0.key, index[$0.stamp]!, $0.value) })
            let again = try TextSegmentMerge.merge([TextSegment(bytes)], tombstones: [])
            #expect(again.postings.map(\.key) == merged.map(\.key))
        }
    }

    @Test func twoLivePostingsOfOneKeyAreDamage() throws {
        var rng = SeededGenerator(seed: 5)
        let stamps = Self.stamps(2, &rng)
        let key: [UInt8] = [0x6B]
        let first = try TextSegment(TextSegment.encode(stamps: [stamps[0]], postings: [(key, 0, Self.value(&rng))]))
        let second = try TextSegment(TextSegment.encode(stamps: [stamps[1]], postings: [(key, 0, Self.value(&rng))]))
        #expect(throws: FormatError.self) { try TextSegmentMerge.merge([first, second], tombstones: []) }
        let cancelled = try TextSegmentMerge.merge(
            [first, second], tombstones: [.init(key: key, stamp: stamps[0])])
        #expect(cancelled.postings.map(\.stamp) == [stamps[1]])
    }
}

/// A term's merged postings as queries walk them: steps and seeks (`lowerBound` from where the
/// walk is), mixed at random, land where a search of the model's live postings lands.
@Suite struct MergedTermPostingsTests {
    /// Segments of key ranges that do not overlap (a chunked import of growing keys) are put end
    /// to end in key order whatever order they come in; ranges that touch at one key are one key
    /// twice (damage) unless a tombstone cancels one of the two.
    @Test(arguments: [21, 22, 23]) func segmentsOfApartKeyRangesMergeInKeyOrder(seed: UInt64) throws {
        var rng = SeededGenerator(seed: seed)
        let objects = TextSegmentTests.keys(120, &rng).sorted { $0.lexicographicallyPrecedes($1) }
        let stamps = TextSegmentTests.stamps(4, &rng)
        // Four runs of consecutive keys, one stamp each.
        let bounds = [0, 17, 18, 70, 120]
        var segments: [(TextSegment, ArraySlice<[UInt8]>, [UInt8])] = []
        for run in 0..<4 {
            let keys = objects[bounds[run]..<bounds[run + 1]]
            let postings = keys.map { ($0, 0, TextSegmentTests.value(&rng)) }
            segments.append(
                (try TextSegment(TextSegment.encode(stamps: [stamps[run]], postings: postings)), keys, stamps[run]))
        }
        segments.shuffle(using: &rng)
        let cancelled = TextSegmentMerge.Identity(key: objects[50], stamp: stamps[2])
        let merged = try MergedTermPostings(segments.map(\.0), tombstones: [cancelled])
        let expected = objects.filter { $0 != objects[50] }
        #expect(merged.count == expected.count)
        #expect((0..<merged.count).map { Array(merged.key($0)) } == expected)
        #expect(merged.usedTombstones == [cancelled])
        for i in 0..<merged.count {
            let run = bounds.lastIndex { $0 <= objects.firstIndex(of: Array(merged.key(i)))! }!
            #expect(merged.stamp(i) == stamps[run])
        }
        // A fifth segment whose one key is the last of another: two live postings of one key.
        let last = objects[bounds[2] - 1]
        let touching = try TextSegment(
            TextSegment.encode(stamps: [stamps[3]], postings: [(last, 0, TextSegmentTests.value(&rng))]))
        #expect(throws: FormatError.self) {
            try MergedTermPostings(segments.map(\.0) + [touching], tombstones: [])
        }
        let again = try MergedTermPostings(
            segments.map(\.0) + [touching], tombstones: [.init(key: last, stamp: stamps[1])])
        #expect(again.count == objects.count)
        #expect((0..<again.count).map { Array(again.key($0)) } == objects)
    }

    @Test(arguments: [11, 12, 13, 14]) func walksAndSeeksLikeTheModel(seed: UInt64) throws {
        var rng = SeededGenerator(seed: seed)
        let objects = TextSegmentTests.keys(200, &rng)
        var live: [[UInt8]: [UInt8]] = [:]
        var tombstones = Set<TextSegmentMerge.Identity>()
        var segments: [TextSegment] = []
        for _ in 0..<Int.random(in: 1...6, using: &rng) {
            let stamp = TextSegmentTests.stamps(1, &rng)
            var postings: [TextSegment.Posting] = []
            for key in objects where Int.random(in: 0..<4, using: &rng) == 0 {
                if let old = live[key] { tombstones.insert(.init(key: key, stamp: old)) }
                if Int.random(in: 0..<4, using: &rng) == 0 {
                    live[key] = nil
                } else {
                    postings.append((key, 0, TextSegmentTests.value(&rng)))
                    live[key] = stamp[0]
                }
            }
            if !postings.isEmpty {
                segments.append(try TextSegment(TextSegment.encode(stamps: stamp, postings: postings)))
            }
        }
        let expected = live.keys.sorted { $0.lexicographicallyPrecedes($1) }
        let merged = try MergedTermPostings(segments, tombstones: tombstones)
        #expect(merged.count == expected.count)
        #expect(merged.usedTombstones == tombstones)
        for _ in 0..<20 {
            var position = -1  // index in `expected` of the posting the walk is on
            var at = -1  // the walk's index in `merged`
            while true {
                if Bool.random(using: &rng) {
                    position += 1
                    at += 1
                    guard position < expected.count else {
                        #expect(at >= merged.count)
                        break
                    }
                } else {
                    let target =
                        Bool.random(using: &rng)
                        ? objects.randomElement(using: &rng)! : TextSegmentTests.keys(1, &rng)[0]
                    // A seek never moves back: from where the walk is, the first key at or after target.
                    let from = Swift.max(position, 0)
                    let landing =
                        expected.indices.first { $0 >= from && !expected[$0].lexicographicallyPrecedes(target) }
                    at = merged.lowerBound(target, from: Swift.max(at, 0))
                    guard let landing else {
                        #expect(at == merged.count)
                        break
                    }
                    position = landing
                }
                #expect(Array(merged.key(at)) == expected[position])
                #expect(merged.stamp(at) == live[expected[position]])
                #expect(merged.find(expected[position]) == at)
            }
        }
    }
}

/// The keys of grouped postings, byte for byte (the vectors another implementation checks itself
/// against), and their parsing.
@Suite struct GroupedPostingKeysTests {
    let term: [UInt8] = [0x30, 0x61, 0x6C, 0x70, 0x68, 0x61, 0x00, 0x00]  // "alpha" (§8)
    let stamp: [UInt8] = Array(0x10...0x1F)

    @Test func keysAreTheDocumentedBytes() throws {
        let segment = GroupedPostingKeys.segmentKey(bucket: 1, index: 1, tuple: term, tier: 2, id: stamp)
        #expect(
            segment == [0x03, 0, 0, 0, 1, 0, 0, 0, 1, 0x31] + term + [0x02] + stamp)
        let tombstone = GroupedPostingKeys.tombstoneKey(
            bucket: 1, index: 1, tuple: term, stamp: stamp, objectKey: Array("z".utf8))
        #expect(tombstone == [0x03, 0, 0, 0, 1, 0, 0, 0, 1, 0x32] + term + stamp + [0x7A])
        // Singles, then segments, then tombstones of an index.
        let single = Keyspace.indexEntryKey(bucket: 1, index: 1, tuple: term, objectKey: "\u{FFFF}")
        #expect(single.lexicographicallyPrecedes(segment) && segment.lexicographicallyPrecedes(tombstone))
    }

    @Test func keysParseBackAndOthersAreRefused() throws {
        let segment = GroupedPostingKeys.segmentKey(bucket: 7, index: 3, tuple: term, tier: 5, id: stamp)
        let parsed = try GroupedPostingKeys.parseSegmentKey(segment, bucket: 7, index: 3, tuple: term)
        #expect(parsed.tier == 5 && parsed.id == stamp)
        #expect(throws: FormatError.self) {
            try GroupedPostingKeys.parseSegmentKey(segment.dropLast().map { $0 }, bucket: 7, index: 3, tuple: term)
        }
        #expect(throws: FormatError.self) {
            try GroupedPostingKeys.parseSegmentKey(segment, bucket: 7, index: 4, tuple: term)
        }
        let objectKey: [UInt8] = [0x00, 0xFF, 0x61]
        let tombstone = GroupedPostingKeys.tombstoneKey(
            bucket: 7, index: 3, tuple: term, stamp: stamp, objectKey: objectKey)
        let identity = try GroupedPostingKeys.parseTombstoneKey(tombstone, bucket: 7, index: 3, tuple: term)
        #expect(identity == .init(key: objectKey, stamp: stamp))
        #expect(throws: FormatError.self) {
            try GroupedPostingKeys.parseTombstoneKey(
                Array(tombstone.prefix(tombstone.count - objectKey.count)), bucket: 7, index: 3, tuple: term)
        }
    }
}

@Suite struct SharedPrefixTests {
    /// Against a byte-by-byte count, for random pairs that share 0 to 40 bytes, of every length
    /// around the eight-byte steps, differing at every position (high and low bits alike).
    @Test func countsTheBytesTwoKeysShare() {
        var rng = SeededGenerator(seed: 5)
        for _ in 0..<5_000 {
            let shared = Int.random(in: 0...40, using: &rng)
            let head = (0..<shared).map { _ in UInt8.random(in: 0...255, using: &rng) }
            var a = head + (0..<Int.random(in: 0...12, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            var b = head + (0..<Int.random(in: 0...12, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            if Bool.random(using: &rng), a.count > shared, b.count > shared {
                // Differing in one bit only.
                b[shared] = a[shared] ^ (1 << UInt8.random(in: 0...7, using: &rng))
            }
            if Bool.random(using: &rng) { a = Array(a.prefix(shared)) }
            var expected = 0
            while expected < min(a.count, b.count), a[expected] == b[expected] { expected += 1 }
            let found = a.withUnsafeBytes { ra in b.withUnsafeBytes { TextSegmentWriter.sharedPrefix(ra, $0) } }
            #expect(found == expected, "\(a) \(b)")
        }
    }
}

/// The buffer segments are written through, against an array given the same appends.
@Suite struct ByteWriterTests {
    @Test func holdsWhatAnArrayGivenTheSameAppendsHolds() {
        var rng = SeededGenerator(seed: 11)
        var writer = ByteWriter(capacity: 1)
        for round in 0..<200 {
            var model: [UInt8] = []
            writer.removeAll()
            for _ in 0..<Int.random(in: 0...60, using: &rng) {
                switch Int.random(in: 0...4, using: &rng) {
                case 0:
                    let byte = UInt8.random(in: 0...255, using: &rng)
                    writer.append(byte)
                    model.append(byte)
                case 1:
                    // Up to 3 KiB at once: past the capacity, so the buffer grows mid-append.
                    let bytes = (0..<Int.random(in: 0...3_000, using: &rng)).map { _ in
                        UInt8.random(in: 0...255, using: &rng)
                    }
                    bytes.withUnsafeBytes { writer.append($0) }
                    model += bytes
                case 2:
                    let value: UInt64 =
                        [0, 1, 127, 128, 16_383, 16_384, UInt64.max, .random(in: 0...UInt64.max, using: &rng)]
                        .randomElement(using: &rng) ?? 0
                    writer.appendVarint(value)
                    Varint.append(value, to: &model)
                case 3:
                    let count = Int.random(in: 0...40, using: &rng)
                    writer.appendZeros(count)
                    model += [UInt8](repeating: 0, count: count)
                default:
                    // Overwriting a byte already written, as a segment's restart offsets are.
                    guard !model.isEmpty else { continue }
                    let at = Int.random(in: 0..<model.count, using: &rng)
                    let byte = UInt8.random(in: 0...255, using: &rng)
                    writer[at] = byte
                    model[at] = byte
                    #expect(writer[at] == byte)
                }
            }
            #expect(writer.count == model.count, "round \(round)")
            #expect(writer.array == model, "round \(round)")
            #expect(writer.withBytes { Array($0) } == model, "round \(round)")
        }
        // Empty appends change nothing.
        writer.removeAll()
        writer.append(UnsafeRawBufferPointer(start: nil, count: 0))
        writer.append([])
        writer.appendZeros(0)
        #expect(writer.count == 0)
        #expect(writer.array == [])
    }
}
