//! Test data shared by the engine crates' tests.

/// Deterministic, incompressible bytes (xorshift); `seed` must not be 0.
pub fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}
