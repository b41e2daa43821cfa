//! The dense path's dot products, compiled once per instruction set and chosen at run time.
//!
//! Each loop is written once ([`dot_lanes`], [`dot_i8_lanes`]) and the compiler vectorises
//! one copy of it for each of x86-64's wider instruction sets (AVX-512BW and AVX2 for the
//! `i8` product that builds and walks the HNSW graph, AVX2 for the `f32` one that scores
//! candidates exactly); a call takes the widest copy the CPU has, as the standard library
//! detects it (once, then cached). Elsewhere (aarch64, where NEON is the baseline) the
//! baseline copy runs. Every copy adds in the same order, so all return the same bits:
//! the integer sums exactly, the `f32` ones lane for lane (Rust never fuses a multiply and
//! an add unless asked).

/// `f32` dot product of `a` and `b` (of equal length): eight running sums, one per lane,
/// then their sum and the remainder's.
#[inline]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2, the only feature the copy was compiled for.
        return unsafe { x86::dot_avx2(a, b) };
    }
    dot_lanes(a, b)
}

/// Integer dot product of `a` and `b` (of equal length): sixteen running sums, then their
/// sum and the remainder's.
#[inline]
pub fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512bw") {
            // SAFETY: the CPU has AVX-512BW (and so AVX-512F), what the copy was compiled for.
            return unsafe { x86::dot_i8_avx512(a, b) };
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2, the only feature the copy was compiled for.
            return unsafe { x86::dot_i8_avx2(a, b) };
        }
    }
    dot_i8_lanes(a, b)
}

#[inline(always)]
fn dot_lanes(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for i in 0..8 {
            acc[i] += x[i] * y[i];
        }
    }
    acc.iter().sum::<f32>() + ra.iter().zip(rb).map(|(x, y)| x * y).sum::<f32>()
}

#[inline(always)]
fn dot_i8_lanes(a: &[i8], b: &[i8]) -> i32 {
    let mut acc = [0i32; 16];
    let (ca, cb) = (a.chunks_exact(16), b.chunks_exact(16));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for i in 0..16 {
            acc[i] += x[i] as i32 * y[i] as i32;
        }
    }
    acc.iter().sum::<i32>() + ra.iter().zip(rb).map(|(&x, &y)| x as i32 * y as i32).sum::<i32>()
}

/// The copies for x86-64's wider instruction sets.
#[cfg(target_arch = "x86_64")]
mod x86 {
    #[target_feature(enable = "avx2")]
    pub(super) fn dot_avx2(a: &[f32], b: &[f32]) -> f32 {
        super::dot_lanes(a, b)
    }

    #[target_feature(enable = "avx2")]
    pub(super) fn dot_i8_avx2(a: &[i8], b: &[i8]) -> i32 {
        super::dot_i8_lanes(a, b)
    }

    #[target_feature(enable = "avx512bw")]
    pub(super) fn dot_i8_avx512(a: &[i8], b: &[i8]) -> i32 {
        super::dot_i8_lanes(a, b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every copy the CPU can run returns the baseline's bits, at lengths with and without
    /// a remainder; and the baseline is the plain sum.
    #[test]
    fn every_copy_returns_the_baselines_bits() {
        let mut rng = crate::testutil::Rng(7);
        for len in [0, 1, 7, 8, 15, 16, 17, 37, 384, 385] {
            for _ in 0..20 {
                let f: Vec<f32> = (0..2 * len).map(|_| (rng.next_u64() % 2001) as f32 / 1000.0 - 1.0).collect();
                let (a, b) = f.split_at(len);
                let q: Vec<i8> = (0..2 * len).map(|_| (rng.next_u64() % 255) as i8).collect();
                let (qa, qb) = q.split_at(len);
                let naive: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
                assert!((dot_lanes(a, b) - naive).abs() < 1e-3, "{len}");
                let exact: i32 = qa.iter().zip(qb).map(|(&x, &y)| x as i32 * y as i32).sum();
                assert_eq!(dot_i8_lanes(qa, qb), exact, "{len}");
                assert_eq!(dot(a, b).to_bits(), dot_lanes(a, b).to_bits(), "{len}");
                assert_eq!(dot_i8(qa, qb), exact, "{len}");
                #[cfg(target_arch = "x86_64")]
                {
                    if std::arch::is_x86_feature_detected!("avx2") {
                        // SAFETY: the CPU has AVX2.
                        assert_eq!(unsafe { x86::dot_avx2(a, b) }.to_bits(), dot_lanes(a, b).to_bits());
                        // SAFETY: as above.
                        assert_eq!(unsafe { x86::dot_i8_avx2(qa, qb) }, exact);
                    }
                    if std::arch::is_x86_feature_detected!("avx512bw") {
                        // SAFETY: the CPU has AVX-512BW.
                        assert_eq!(unsafe { x86::dot_i8_avx512(qa, qb) }, exact);
                    }
                }
            }
        }
    }
}
