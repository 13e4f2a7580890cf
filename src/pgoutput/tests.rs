//! Golden bytes captured from PostgreSQL 15.18 with
//! `pg_logical_slot_peek_binary_changes(slot, NULL, NULL, 'proto_version', '1', 'publication_names', ...,
//! 'messages', 'true')` over a table `golden_outbox (id uuid, aggregatetype varchar, aggregateid varchar,
//! type varchar, payload jsonb, m mood)` with REPLICA IDENTITY FULL and an enum type `mood`.

use super::*;

fn hex(s: &str) -> Bytes {
    assert!(s.len() % 2 == 0);
    Bytes::from((0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect::<Vec<_>>())
}

const BEGIN: &str = "420000000001507418000304717dcc7801000002da";
const TYPE: &str = "59000040037075626c6963006d6f6f6400";
const RELATION: &str = "52000040077075626c696300676f6c64656e5f6f7574626f78006600060169640000000b86ffffffff01616767726567617465747970650000000413000001030161676772656761746569640000000413000001030174797065000000041300000103017061796c6f61640000000edaffffffff016d0000004003ffffffff";
const INSERT: &str = "49000040074e0006740000002434643437653139302d303430322d343034382d626332632d38396464353433343363646374000000054f7264657274000000076f726465722d34740000000c4f726465724372656174656474000000207b226e223a20342c20226e6f7465223a202268c3a96c6c6f205c22715c22227d74000000056861707079";
const INSERT_NULLS: &str = "49000040074e0006740000002430303030303030302d303030302d303030302d303030302d30303030303030303030303174000000054f7264657274000000076f726465722d35740000000c4f72646572437265617465646e6e";
const MESSAGE_TX: &str = "4d010000000001507418676f6c64656e00000000137472616e73616374696f6e616c2068656c6c6f";
const COMMIT: &str = "430000000000015074180000000001507448000304717dcc7801";
const UPDATE: &str = "55000040074f0006740000002430303030303030302d303030302d303030302d303030302d30303030303030303030303174000000054f7264657274000000076f726465722d35740000000c4f72646572437265617465646e6e4e0006740000002430303030303030302d303030302d303030302d303030302d30303030303030303030303174000000054f7264657274000000076f726465722d35740000000c4f72646572557064617465646e6e";
const DELETE: &str = "44000040074f0006740000002430303030303030302d303030302d303030302d303030302d30303030303030303030303174000000054f7264657274000000076f726465722d35740000000c4f72646572557064617465646e6e";
const TRUNCATE: &str = "54000000010000004007";
const MESSAGE_PLAIN: &str = "4d000000000001508310676f6c64656e0000000005706c61696e";
const ORIGIN: &str = "4f0000000000000000676f6c64656e5f6f726967696e00";

const ALL: [&str; 12] =
    [BEGIN, TYPE, RELATION, INSERT, INSERT_NULLS, MESSAGE_TX, COMMIT, UPDATE, DELETE, TRUNCATE, MESSAGE_PLAIN, ORIGIN];

fn text(v: &Value) -> &str {
    match v {
        Value::Text(b) => std::str::from_utf8(b).unwrap(),
        other => panic!("expected text, got {other:?}"),
    }
}

#[test]
fn decode_begin_golden() {
    let LogicalMessage::Begin(b) = decode(hex(BEGIN)).unwrap() else { panic!() };
    assert_eq!(b.final_lsn, "0/1507418".parse().unwrap());
    assert_eq!(b.xid, 730);
    assert!(b.commit_time > 0);
}

#[test]
fn decode_commit_golden() {
    let LogicalMessage::Commit(c) = decode(hex(COMMIT)).unwrap() else { panic!() };
    assert_eq!(c.flags, 0);
    assert_eq!(c.commit_lsn, "0/1507418".parse().unwrap());
    assert_eq!(c.end_lsn, "0/1507448".parse().unwrap());
}

#[test]
fn decode_relation_golden() {
    let LogicalMessage::Relation(r) = decode(hex(RELATION)).unwrap() else { panic!() };
    assert_eq!((r.namespace.as_str(), r.name.as_str()), ("public", "golden_outbox"));
    assert_eq!(r.replica_identity, b'f');
    let names: Vec<_> = r.columns.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["id", "aggregatetype", "aggregateid", "type", "payload", "m"]);
    assert_eq!(r.columns[0].type_oid, 2950); // uuid
    assert_eq!(r.columns[1].type_modifier, 259); // varchar(255) + VARHDRSZ
    assert_eq!(r.columns[4].type_oid, 3802); // jsonb
    assert!(r.columns.iter().all(|c| c.flags == 1), "replica identity full marks every column as key");
}

#[test]
fn decode_type_golden() {
    let LogicalMessage::Type(t) = decode(hex(TYPE)).unwrap() else { panic!() };
    assert_eq!((t.namespace.as_str(), t.name.as_str()), ("public", "mood"));
}

#[test]
fn decode_insert_golden_keeps_text_values() {
    let LogicalMessage::Insert(i) = decode(hex(INSERT)).unwrap() else { panic!() };
    let v = &i.new.values;
    assert_eq!(v.len(), 6);
    assert_eq!(text(&v[0]), "4d47e190-0402-4048-bc2c-89dd54343cdc");
    assert_eq!(text(&v[2]), "order-4");
    assert_eq!(text(&v[4]), r#"{"n": 4, "note": "héllo \"q\""}"#);
    let LogicalMessage::Insert(i) = decode(hex(INSERT_NULLS)).unwrap() else { panic!() };
    assert_eq!(i.new.values[4], Value::Null);
    assert_eq!(i.new.values[5], Value::Null);
}

#[test]
fn decode_update_golden_with_old_row() {
    let LogicalMessage::Update(u) = decode(hex(UPDATE)).unwrap() else { panic!() };
    assert_eq!(text(&u.old.as_ref().unwrap().values[3]), "OrderCreated");
    assert_eq!(text(&u.new.values[3]), "OrderUpdated");
}

#[test]
fn decode_delete_golden() {
    let LogicalMessage::Delete(d) = decode(hex(DELETE)).unwrap() else { panic!() };
    assert_eq!(text(&d.old.values[2]), "order-5");
}

#[test]
fn decode_truncate_golden() {
    let LogicalMessage::Truncate(t) = decode(hex(TRUNCATE)).unwrap() else { panic!() };
    assert_eq!(t.relations.len(), 1);
}

#[test]
fn decode_messages_golden() {
    let LogicalMessage::Message(m) = decode(hex(MESSAGE_TX)).unwrap() else { panic!() };
    assert!(m.transactional);
    assert_eq!((m.prefix.as_str(), &m.content[..]), ("golden", &b"transactional hello"[..]));
    let LogicalMessage::Message(m) = decode(hex(MESSAGE_PLAIN)).unwrap() else { panic!() };
    assert!(!m.transactional);
    assert_eq!(&m.content[..], b"plain");
}

#[test]
fn decode_origin_golden() {
    let LogicalMessage::Origin(o) = decode(hex(ORIGIN)).unwrap() else { panic!() };
    assert_eq!(o.name, "golden_origin");
}

#[test]
fn decode_rejects_every_truncation_of_every_golden_message() {
    for golden in ALL {
        let full = hex(golden);
        for len in 0..full.len() {
            assert!(decode(full.slice(..len)).is_err(), "{golden} truncated to {len} bytes decoded");
        }
    }
}

#[test]
fn decode_rejects_trailing_bytes_and_unknown_tags() {
    let mut long = hex(COMMIT).to_vec();
    long.push(0);
    assert_eq!(decode(Bytes::from(long)), Err(DecodeError::TrailingBytes(1)));
    assert_eq!(decode(Bytes::from_static(b"Z")), Err(DecodeError::UnknownTag { tag: b'Z' }));
}

#[test]
fn decode_rejects_corrupted_bytes_without_panicking() {
    // Flip every byte of every golden message through a few values: never a panic.
    for golden in ALL {
        let full = hex(golden).to_vec();
        for i in 0..full.len() {
            for x in [0x00u8, 0x7f, 0x80, 0xff] {
                let mut m = full.clone();
                m[i] = x;
                let _ = decode(Bytes::from(m));
            }
        }
    }
}

#[test]
fn decode_refuses_huge_counts_before_allocating() {
    // An Insert claiming 32767 columns with 3 bytes of data must fail on the count, not allocate.
    let msg = Bytes::from_static(&[b'I', 0, 0, 0, 1, b'N', 0x7f, 0xff, b'n', b'n', b'n']);
    assert!(matches!(decode(msg), Err(DecodeError::InvalidCount { .. })));
    // A value length of 2 GiB with nothing behind it.
    let msg = Bytes::from_static(&[b'I', 0, 0, 0, 1, b'N', 0, 1, b't', 0x7f, 0xff, 0xff, 0xff]);
    assert!(matches!(decode(msg), Err(DecodeError::Truncated { .. })));
    let msg = Bytes::from_static(&[b'T', 0xff, 0xff, 0xff, 0xff, 0]);
    assert!(matches!(decode(msg), Err(DecodeError::InvalidCount { .. })));
}
