// Helpers with no dependency but Foundation, so that every test target can use them — including
// LevelDBTests and BuriCodecTests, which test layers below Buri and must not link Buri, BuriStorage
// or BuriEtcd (as BuriTestSupport does). BuriTestSupport re-exports this module.

/// SplitMix64: a small, fast generator fully determined by its seed, so that random tests
/// reproduce. The same algorithm as the BuriStress child's generator.
///
/// ```swift
/// var random = SeededGenerator(seed: 42)
/// let n = Int.random(in: 0..<10, using: &random)   // the same n on every run
/// ```
public struct SeededGenerator: RandomNumberGenerator, Sendable {
    public var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
