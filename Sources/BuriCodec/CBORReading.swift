// Typed reads of single items for CBORDecoder: each checks bounds, skips any
// tags in front of the item, and converts losslessly or throws.

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

extension _CBORInput {
    /// Reads the head of a value, skipping any tags in front of it.
    @inline(__always)
    func readValueHead(_ pos: inout Int) throws -> (initial: UInt8, argument: UInt64) {
        var head = try readHead(&pos)
        while head.initial >> 5 == _Major.tag { head = try readHead(&pos) }
        return head
    }

    /// The offset after a null or undefined at `pos`, or nil for anything else.
    func nilEnd(at pos: Int) -> Int? {
        var p = pos
        guard let head = try? readValueHead(&p) else { return nil }
        return head.initial == _Simple.null || head.initial == _Simple.undefined ? p : nil
    }

    func mismatch(_ initial: UInt8, at offset: Int, expected: String) -> CBORError {
        let found = _describeInitial(initial)
        if initial == _Simple.null || initial == _Simple.undefined {
            return CBORError(
                .valueNotFound, "found \(found) where a non-optional value was required",
                offset: offset, expected: expected, found: found)
        }
        return CBORError(.typeMismatch, "the item has another type", offset: offset, expected: expected, found: found)
    }

    func outOfRange(_ found: String, expected: String, at offset: Int) -> CBORError {
        CBORError(.valueOutOfRange, "the number does not fit", offset: offset, expected: expected, found: found)
    }

    /// The float value of a major-7 head, or nil if it is not a float.
    @inline(__always)
    func floatValue(_ initial: UInt8, _ argument: UInt64) -> Double? {
        switch initial {
        case _Simple.double: return Double(bitPattern: argument)
        case _Simple.float: return Double(Float(bitPattern: UInt32(truncatingIfNeeded: argument)))
        case _Simple.half: return _halfToDouble(UInt16(truncatingIfNeeded: argument))
        default: return nil
        }
    }

    /// `-1 - argument` as text (it may be -2^64, beyond Int64).
    func negativeText(_ argument: UInt64) -> String {
        argument == .max ? "-18446744073709551616" : "-\(argument + 1)"
    }

    // MARK: Scalars

    @inline(__always)
    func readBool(_ pos: inout Int) throws -> Bool {
        let start = pos
        let (initial, _) = try readValueHead(&pos)
        if initial == _Simple.true { return true }
        if initial == _Simple.false { return false }
        throw mismatch(initial, at: start, expected: "bool")
    }

    @inline(__always)
    func readString(_ pos: inout Int) throws -> String {
        let start = pos
        let (initial, argument) = try readValueHead(&pos)
        guard initial >> 5 == _Major.text else { throw mismatch(initial, at: start, expected: "text string") }
        let length = try checkedLength(argument, at: pos, headStart: start)
        let string = try makeString(at: pos, length: length, headStart: start)
        pos += length
        return string
    }

    /// A String from `length` bytes at `pos`, which must be valid UTF-8.
    @inline(__always)
    func makeString(at pos: Int, length: Int, headStart: Int) throws -> String {
        let buffer = UnsafeBufferPointer(start: base + pos, count: length)
        // ASCII is valid UTF-8; the generic validating initialiser is slow.
        if _isASCII(buffer) { return String(decoding: buffer, as: UTF8.self) }
        guard let string = String(validating: buffer, as: UTF8.self) else {
            throw CBORError(.invalidUTF8, "a text string is not valid UTF-8", offset: headStart)
        }
        return string
    }

    /// An integer of type `T`; accepts integral floats that fit exactly.
    @inline(__always)
    func readInteger<T: FixedWidthInteger>(_ pos: inout Int, as type: T.Type) throws -> T {
        let start = pos
        let (initial, argument) = try readValueHead(&pos)
        switch initial >> 5 {
        case _Major.unsigned:
            if let value = T(exactly: argument) { return value }
            throw outOfRange(String(argument), expected: "\(T.self)", at: start)
        case _Major.negative:
            if argument <= UInt64(Int64.max), let value = T(exactly: ~Int64(bitPattern: argument)) { return value }
            throw outOfRange(negativeText(argument), expected: "\(T.self)", at: start)
        default:
            if let double = floatValue(initial, argument) {
                if let value = T(exactly: double) { return value }
                throw outOfRange("\(double)", expected: "\(T.self)", at: start)
            }
            throw mismatch(initial, at: start, expected: "\(T.self)")
        }
    }

    /// A Double; accepts any float width, integers that convert exactly, and
    /// the texts "NaN", "Infinity" and "-Infinity" (the JSON bridge's forms).
    @inline(__always)
    func readDouble(_ pos: inout Int) throws -> Double {
        let start = pos
        let (initial, argument) = try readValueHead(&pos)
        if let double = floatValue(initial, argument) { return double }
        return try nonFloatDouble(initial, argument, &pos, start: start, expected: "Double")
    }

    func nonFloatDouble(
        _ initial: UInt8, _ argument: UInt64, _ pos: inout Int, start: Int, expected: String
    ) throws -> Double {
        switch initial >> 5 {
        case _Major.unsigned:
            if let double = Double(exactly: argument) { return double }
            throw outOfRange(String(argument), expected: expected, at: start)
        case _Major.negative:
            if argument == .max { return -0x1p64 }
            if let double = Double(exactly: argument + 1) { return -double }
            throw outOfRange(negativeText(argument), expected: expected, at: start)
        case _Major.text:
            let length = try checkedLength(argument, at: pos, headStart: start)
            let text = try makeString(at: pos, length: length, headStart: start)
            pos += length
            switch text {
            case "NaN": return .nan
            case "Infinity": return .infinity
            case "-Infinity": return -.infinity
            default:
                throw CBORError(
                    .typeMismatch, "the text is not a number", offset: start, expected: expected, found: "text string")
            }
        default:
            throw mismatch(initial, at: start, expected: expected)
        }
    }

    /// A Float. float32 items keep their exact bits; wider floats round to
    /// the nearest Float (an error if that overflows); integers must convert
    /// exactly.
    @inline(__always)
    func readFloat(_ pos: inout Int) throws -> Float {
        let start = pos
        let (initial, argument) = try readValueHead(&pos)
        if initial == _Simple.float { return Float(bitPattern: UInt32(truncatingIfNeeded: argument)) }
        if let double = floatValue(initial, argument) {
            let single = Float(double)
            if single.isInfinite && double.isFinite {
                throw outOfRange("\(double)", expected: "Float", at: start)
            }
            return single
        }
        let double = try nonFloatDouble(initial, argument, &pos, start: start, expected: "Float")
        if double.isNaN { return .nan }
        if let single = Float(exactly: double) { return single }
        throw outOfRange("\(double)", expected: "Float", at: start)
    }

    // MARK: Foundation types

    /// A byte string; leniently also an array of integers 0...255 or a
    /// base64 text string.
    func readData(_ pos: inout Int) throws -> Data {
        let start = pos
        let (initial, argument) = try readValueHead(&pos)
        switch initial >> 5 {
        case _Major.bytes:
            let length = try checkedLength(argument, at: pos, headStart: start)
            let data = Data(UnsafeBufferPointer(start: base + pos, count: length))
            pos += length
            return data
        case _Major.array:
            let count = try checkedCount(argument, perItem: 1, at: pos, headStart: start)
            var data = Data(capacity: count)
            for _ in 0..<count { data.append(try readInteger(&pos, as: UInt8.self)) }
            return data
        case _Major.text:
            let length = try checkedLength(argument, at: pos, headStart: start)
            let text = try makeString(at: pos, length: length, headStart: start)
            pos += length
            guard let data = Data(base64Encoded: text) else {
                throw CBORError(
                    .typeMismatch, "the text is not base64", offset: start, expected: "byte string",
                    found: "text string")
            }
            return data
        default:
            throw mismatch(initial, at: start, expected: "byte string")
        }
    }

    /// A 128-bit integer: any CBOR integer (all of -2^64 ... 2^64-1 fit an `Int128`), or an
    /// integral float that fits.
    func readWide<T: FixedWidthInteger>(_ pos: inout Int, as type: T.Type) throws -> T {
        let start = pos
        let (initial, argument) = try readValueHead(&pos)
        switch initial >> 5 {
        case _Major.unsigned:
            if let value = T(exactly: argument) { return value }
            throw outOfRange(String(argument), expected: "\(T.self)", at: start)
        case _Major.negative:
            if let value = T(exactly: -1 - Int128(argument)) { return value }
            throw outOfRange(negativeText(argument), expected: "\(T.self)", at: start)
        default:
            if let double = floatValue(initial, argument) {
                if let value = T(exactly: double) { return value }
                throw outOfRange("\(double)", expected: "\(T.self)", at: start)
            }
            throw mismatch(initial, at: start, expected: "\(T.self)")
        }
    }

    /// A `Date`: tag 1 or tag 1001 (see `CBORDate.swift`), else, as format version 1 wrote
    /// dates, a number of seconds since 2001. Other tags in front are skipped.
    func readDate(_ pos: inout Int) throws -> Date {
        let start = pos
        var probe = pos
        var head = try readHead(&probe)
        while head.initial >> 5 == _Major.tag, head.argument != _CBORDate.epochTag,
            head.argument != _CBORDate.extendedTag
        {
            pos = probe
            head = try readHead(&probe)
        }
        guard head.initial >> 5 == _Major.tag else {
            return Date(timeIntervalSinceReferenceDate: try readDouble(&pos))
        }
        let item = try _CBORValueParser(input: self).parse(&pos, depth: 0)
        do {
            guard let seconds = try _CBORDate.referenceSeconds(item) else {
                throw CBORError(.typeMismatch, "not a date", offset: start, expected: "Date")
            }
            return Date(timeIntervalSinceReferenceDate: seconds)
        } catch var error as CBORError {
            error.offset = error.offset ?? start
            throw error
        }
    }

    /// Tag 32 around text, or plain text.
    func readURL(_ pos: inout Int) throws -> URL {
        let start = pos
        let text = try readString(&pos)
        guard let url = URL(string: text) else {
            throw CBORError(
                .typeMismatch, "the text is not a URL", offset: start, expected: "URL", found: "text string")
        }
        return url
    }
}

/// True if every byte is below 0x80 (checked eight bytes at a time).
@inline(__always)
func _isASCII(_ buffer: UnsafeBufferPointer<UInt8>) -> Bool {
    guard let base = buffer.baseAddress else { return true }
    let raw = UnsafeRawPointer(base)
    let count = buffer.count
    var i = 0
    while count - i >= 8 {
        if raw.loadUnaligned(fromByteOffset: i, as: UInt64.self) & 0x8080_8080_8080_8080 != 0 { return false }
        i += 8
    }
    while i < count {
        if base[i] & 0x80 != 0 { return false }
        i += 1
    }
    return true
}

/// True if the `name.count` bytes at `bytes` equal `name`.
@inline(__always)
func _bytesEqual(_ bytes: UnsafePointer<UInt8>, _ name: UnsafeBufferPointer<UInt8>) -> Bool {
    guard let other = name.baseAddress else { return true }
    let count = name.count
    let a = UnsafeRawPointer(bytes)
    let b = UnsafeRawPointer(other)
    var i = 0
    while count - i >= 8 {
        if a.loadUnaligned(fromByteOffset: i, as: UInt64.self) != b.loadUnaligned(fromByteOffset: i, as: UInt64.self) {
            return false
        }
        i += 8
    }
    while i < count {
        if bytes[i] != other[i] { return false }
        i += 1
    }
    return true
}
