/// How hard stretching a passphrase with scrypt (RFC 7914) is: N = 2^`logN` rounds of block size
/// `r` and parallelism `p`. Stretching takes about 128 × N × r bytes of memory (32 MiB for the
/// default) and time in proportion to N × r × p, on every open of the database as for a guesser's
/// every try.
///
/// The cost is stored in the database's encryption header, so a database keeps the cost it was
/// created with whatever cost later opens pass. A passphrase key refuses a cost above logN 22, r 32
/// or p 16, or one scrypt cannot run (logN of at least 16 × r; r above 16 with p of 1, as the
/// memory bound swift-crypto gives scrypt is too tight for it); opening refuses such a stored cost
/// as a damaged header before stretching anything.
///
/// ```swift
/// // About 128 MiB and four times the default's time, for a database opened rarely.
/// let key = try DatabaseKey(passphrase: phrase, cost: ScryptCost(logN: 17, r: 8, p: 1))
/// ```
public struct ScryptCost: Sendable, Hashable {
    /// N = 2^logN, the number of rounds (and of blocks held in memory).
    ///
    /// ```swift
    /// var cost = ScryptCost.default
    /// cost.logN = 16   // twice the memory and the time
    /// ```
    public var logN: UInt8
    /// The block size: each of the N blocks is 128 × r bytes.
    ///
    /// ```swift
    /// let cost = ScryptCost(logN: 15, r: 8, p: 1)
    /// print(cost.r)   // 8
    /// ```
    public var r: UInt8
    /// The parallelism: how many independent mixes are run (one after another here).
    ///
    /// ```swift
    /// let cost = ScryptCost(logN: 15, r: 8, p: 2)   // twice the time, the same memory
    /// ```
    public var p: UInt8

    /// A cost of N = 2^`logN`, block size `r` and parallelism `p`; checked when a passphrase key
    /// is made with it.
    ///
    /// ```swift
    /// let quick = ScryptCost(logN: 10, r: 8, p: 1)   // for tests only
    /// ```
    public init(logN: UInt8, r: UInt8, p: UInt8) {
        self.logN = logN
        self.r = r
        self.p = p
    }

    /// logN 15, r 8, p 1: 32 MiB and a tenth of a second or more per stretch on current hardware,
    /// the cost Go's `x/crypto/scrypt` recommends for interactive logins (as of 2017).
    ///
    /// ```swift
    /// let key = try DatabaseKey(passphrase: phrase, cost: .default)
    /// ```
    public static let `default` = ScryptCost(logN: 15, r: 8, p: 1)

    /// The largest cost accepted in each parameter, so that a damaged header cannot make opening
    /// stretch for hours.
    static let limit = ScryptCost(logN: 22, r: 32, p: 16)
    /// The most memory a stretch may take (128 × r × N bytes): 1 GiB.
    static let maximumMemory = 1 << 30

    /// Why this cost cannot be used, or nil when it can.
    var refusal: String? {
        let limit = Self.limit
        if logN < 1 || logN > limit.logN { return "logN must be 1 to \(limit.logN)" }
        if r < 1 || r > limit.r { return "r must be 1 to \(limit.r)" }
        if p < 1 || p > limit.p { return "p must be 1 to \(limit.p)" }
        // RFC 7914: N < 2^(128 × r / 8).
        if Int(logN) >= 16 * Int(r) { return "logN must be below 16 × r" }
        // swift-crypto lets scrypt use 128 × N × r × p bytes and a memory page, and it needs
        // 128 × r × (N + p + 1): with p 1 that fits a 4 KiB page only up to r 16.
        if p == 1 && r > 16 { return "r above 16 needs p of at least 2" }
        // Memory: 128 × r × N bytes, at most 1 GiB, so that one damaged byte of a stored cost
        // cannot make opening allocate gigabytes before its key check fails.
        if 128 * Int(r) << Int(logN) > Self.maximumMemory {
            return "it would take \((128 * Int(r) << Int(logN)) >> 20) MiB, over the limit of 1024 MiB"
        }
        return nil
    }

    /// `logN 15, r 8, p 1`, for messages.
    var summary: String { "logN \(logN), r \(r), p \(p)" }
}
