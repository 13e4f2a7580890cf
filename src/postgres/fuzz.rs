//! A budgeted property test of the decoders on arbitrary bytes: random messages, and golden messages
//! from a real server with random mutations (flips, truncations, insertions, huge counts). The
//! property: decoding returns `Ok` or `Err`, never panics, and never yields more values than the
//! input has bytes (no allocation sized from a count on the wire). The budget is
//! `PGOUTBOX_FUZZ_ITERATIONS` (default 2,000,000), so CI runs it in a few seconds.

use bytes::{Bytes, BytesMut};

use super::wire::{parse_copy_data, parse_data_row, parse_frame};
use crate::pgoutput::{decode, LogicalMessage};

/// xorshift64*: deterministic, so a failure reproduces from its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const GOLDEN: &[&str] = &[
    "420000000001507418000304717dcc7801000002da",
    "52000040077075626c696300676f6c64656e5f6f7574626f78006600060169640000000b86ffffffff01616767726567617465747970650000000413000001030161676772656761746569640000000413000001030174797065000000041300000103017061796c6f61640000000edaffffffff016d0000004003ffffffff",
    "49000040074e0006740000002434643437653139302d303430322d343034382d626332632d38396464353433343363646374000000054f7264657274000000076f726465722d34740000000c4f726465724372656174656474000000207b226e223a20342c20226e6f7465223a202268c3a96c6c6f205c22715c22227d74000000056861707079",
    "55000040074f0006740000002430303030303030302d303030302d303030302d303030302d30303030303030303030303174000000054f7264657274000000076f726465722d35740000000c4f72646572437265617465646e6e4e0006740000002430303030303030302d303030302d303030302d303030302d30303030303030303030303174000000054f7264657274000000076f726465722d35740000000c4f72646572557064617465646e6e",
    "54000000010000004007",
    "4d010000000001507418676f6c64656e00000000137472616e73616374696f6e616c2068656c6c6f",
    "430000000000015074180000000001507448000304717dcc7801",
    "4f0000000000000000676f6c64656e5f6f726967696e00",
];

fn hex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap_or(0)).collect()
}

fn mutate(rng: &mut Rng, mut m: Vec<u8>) -> Vec<u8> {
    for _ in 0..=rng.below(4) {
        match rng.below(6) {
            0 if !m.is_empty() => {
                let i = rng.below(m.len());
                m[i] = rng.next() as u8;
            }
            1 => m.truncate(rng.below(m.len() + 1)),
            2 => {
                let i = rng.below(m.len() + 1);
                m.insert(i, rng.next() as u8);
            }
            3 if m.len() > 4 => {
                // A huge count or length somewhere.
                let i = rng.below(m.len() - 3);
                m[i..i + 4].copy_from_slice(&[0x7f, 0xff, 0xff, 0xff]);
            }
            4 if !m.is_empty() => {
                let i = rng.below(m.len());
                m.remove(i);
            }
            _ => m.extend((0..rng.below(8)).map(|_| rng.next() as u8)),
        }
    }
    m
}

fn values_in(msg: &LogicalMessage) -> usize {
    match msg {
        LogicalMessage::Insert(i) => i.new.values.len(),
        LogicalMessage::Update(u) => u.new.values.len() + u.old.as_ref().map_or(0, |o| o.values.len()),
        LogicalMessage::Delete(d) => d.old.values.len(),
        LogicalMessage::Relation(r) => r.columns.len(),
        LogicalMessage::Truncate(t) => t.relations.len(),
        _ => 0,
    }
}

#[test]
fn decoders_survive_arbitrary_bytes() {
    let iterations: usize =
        std::env::var("PGOUTBOX_FUZZ_ITERATIONS").ok().and_then(|v| v.parse().ok()).unwrap_or(2_000_000);
    let golden: Vec<Vec<u8>> = GOLDEN.iter().map(|g| hex(g)).collect();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let tags = b"BCORYIUDTMZ\0";
    for _ in 0..iterations {
        let input = if rng.below(3) == 0 {
            let mut m = vec![tags[rng.below(tags.len())]];
            m.extend((0..rng.below(64)).map(|_| rng.next() as u8));
            m
        } else {
            let base = golden[rng.below(golden.len())].clone();
            mutate(&mut rng, base)
        };
        let len = input.len();
        if let Ok(msg) = decode(Bytes::from(input.clone())) {
            assert!(values_in(&msg) <= len, "decoded more values than bytes from {input:02x?}");
        }
        // The same bytes as backend frames and replication messages.
        let mut buf = BytesMut::from(&input[..]);
        while let Ok(Some(frame)) = parse_frame(&mut buf) {
            let _ = parse_copy_data(frame.body.clone());
            let _ = parse_data_row(&frame.body);
        }
        let _ = parse_copy_data(Bytes::from(input));
    }
}
