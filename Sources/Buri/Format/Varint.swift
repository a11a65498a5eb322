/// Unsigned LEB128 varints, as used in record headers (`docs/FORMAT.md`, "Record values"):
/// seven bits per byte, least significant group first, high bit set on every byte but the last.
enum Varint {
    @inline(__always)
    static func append(_ value: UInt64, to out: inout [UInt8]) {
        var rest = value
        while rest >= 0x80 {
            out.append(UInt8(truncatingIfNeeded: rest) | 0x80)
            rest >>= 7
        }
        out.append(UInt8(rest))
    }

    /// Reads a varint at `offset` and moves past it. At most 10 bytes; rejects overlong or truncated input.
    @inline(__always)
    static func read(_ bytes: UnsafeRawBufferPointer, at offset: inout Int) throws(FormatError) -> UInt64 {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            guard offset < bytes.count else { throw FormatError("varint truncated at byte \(offset)") }
            let byte = bytes[offset]
            offset += 1
            guard shift < 64, !(shift == 63 && byte > 1) else {
                throw FormatError("varint longer than 64 bits at byte \(offset - 1)")
            }
            result |= UInt64(byte & 0x7F) << shift
            if byte < 0x80 { return result }
            shift += 7
        }
    }
}
