//! Just enough of the protobuf wire format to edit an ONNX graph: messages are kept as
//! lists of fields, so every field we do not touch is written back byte for byte.

use crate::error::{CoreError, Result};

/// One field's payload.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// Wire type 0.
    Varint(u64),
    /// Wire type 1.
    Fixed64([u8; 8]),
    /// Wire type 2 (strings, bytes, sub-messages, packed repeated fields).
    Bytes(Vec<u8>),
    /// Wire type 5.
    Fixed32([u8; 4]),
}

/// A field number and its payload.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    /// Field number.
    pub num: u32,
    /// Payload.
    pub value: Value,
}

fn malformed(what: &str) -> CoreError {
    CoreError::Model(format!("model file is not valid ONNX protobuf ({what})"))
}

fn read_varint(buf: &[u8], at: &mut usize) -> Result<u64> {
    let mut v: u64 = 0;
    for shift in (0..64).step_by(7) {
        let b = *buf.get(*at).ok_or_else(|| malformed("truncated varint"))?;
        *at += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err(malformed("varint too long"))
}

fn take<'a>(buf: &'a [u8], at: &mut usize, n: usize) -> Result<&'a [u8]> {
    let end = at
        .checked_add(n)
        .filter(|&e| e <= buf.len())
        .ok_or_else(|| malformed("truncated field"))?;
    let s = &buf[*at..end];
    *at = end;
    Ok(s)
}

/// Splits a message into its fields.
pub fn decode(buf: &[u8]) -> Result<Vec<Field>> {
    let mut at = 0;
    let mut fields = Vec::new();
    while at < buf.len() {
        let key = read_varint(buf, &mut at)?;
        let num = u32::try_from(key >> 3).map_err(|_| malformed("field number"))?;
        let value = match key & 7 {
            0 => Value::Varint(read_varint(buf, &mut at)?),
            1 => Value::Fixed64(take(buf, &mut at, 8)?.try_into().expect("8 bytes")),
            2 => {
                let n =
                    usize::try_from(read_varint(buf, &mut at)?).map_err(|_| malformed("length"))?;
                Value::Bytes(take(buf, &mut at, n)?.to_vec())
            }
            5 => Value::Fixed32(take(buf, &mut at, 4)?.try_into().expect("4 bytes")),
            other => return Err(malformed(&format!("wire type {other}"))),
        };
        fields.push(Field { num, value });
    }
    Ok(fields)
}

fn write_varint(mut v: u64, out: &mut Vec<u8>) {
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

/// Writes fields back as a message.
pub fn encode(fields: &[Field], out: &mut Vec<u8>) {
    for f in fields {
        let wire = match f.value {
            Value::Varint(_) => 0,
            Value::Fixed64(_) => 1,
            Value::Bytes(_) => 2,
            Value::Fixed32(_) => 5,
        };
        write_varint((u64::from(f.num) << 3) | wire, out);
        match &f.value {
            Value::Varint(v) => write_varint(*v, out),
            Value::Fixed64(b) => out.extend_from_slice(b),
            Value::Fixed32(b) => out.extend_from_slice(b),
            Value::Bytes(b) => {
                write_varint(b.len() as u64, out);
                out.extend_from_slice(b);
            }
        }
    }
}

/// Encodes fields into a fresh buffer.
pub fn to_bytes(fields: &[Field]) -> Vec<u8> {
    let mut out = Vec::new();
    encode(fields, &mut out);
    out
}

/// A string field.
pub fn string(num: u32, s: &str) -> Field {
    Field {
        num,
        value: Value::Bytes(s.as_bytes().to_vec()),
    }
}

/// A varint field.
pub fn varint(num: u32, v: u64) -> Field {
    Field {
        num,
        value: Value::Varint(v),
    }
}

/// A sub-message or bytes field.
pub fn bytes(num: u32, b: Vec<u8>) -> Field {
    Field {
        num,
        value: Value::Bytes(b),
    }
}

/// The UTF-8 strings of every `num` field.
pub fn strings(fields: &[Field], num: u32) -> Vec<String> {
    messages(fields, num)
        .into_iter()
        .map(|b| String::from_utf8_lossy(b).into_owned())
        .collect()
}

/// The payloads of every `num` field holding bytes (sub-messages, strings).
pub fn messages(fields: &[Field], num: u32) -> Vec<&[u8]> {
    fields
        .iter()
        .filter(|f| f.num == num)
        .filter_map(|f| match &f.value {
            Value::Bytes(b) => Some(b.as_slice()),
            _ => None,
        })
        .collect()
}

/// The first `num` string field, or "".
pub fn first_string(fields: &[Field], num: u32) -> String {
    strings(fields, num).into_iter().next().unwrap_or_default()
}

/// Every integer of a repeated int field, packed or not.
pub fn ints(fields: &[Field], num: u32) -> Result<Vec<i64>> {
    let mut out = Vec::new();
    for f in fields.iter().filter(|f| f.num == num) {
        match &f.value {
            Value::Varint(v) => out.push(*v as i64),
            Value::Bytes(b) => {
                let mut at = 0;
                while at < b.len() {
                    out.push(read_varint(b, &mut at)? as i64);
                }
            }
            _ => return Err(malformed("integer field")),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip_byte_for_byte() {
        let fields = vec![
            varint(1, 300),
            string(2, "MatMul"),
            Field {
                num: 3,
                value: Value::Fixed32([1, 2, 3, 4]),
            },
            Field {
                num: 4,
                value: Value::Fixed64([9; 8]),
            },
            bytes(5, to_bytes(&[varint(1, 7)])),
        ];
        let buf = to_bytes(&fields);
        assert_eq!(decode(&buf).unwrap(), fields);
        assert_eq!(to_bytes(&decode(&buf).unwrap()), buf);
    }

    #[test]
    fn packed_and_unpacked_ints_are_read_alike() {
        let mut packed = Vec::new();
        for v in [3u64, 384, 1] {
            write_varint(v, &mut packed);
        }
        assert_eq!(ints(&[bytes(1, packed)], 1).unwrap(), [3, 384, 1]);
        assert_eq!(ints(&[varint(1, 3), varint(1, 384)], 1).unwrap(), [3, 384]);
    }

    #[test]
    fn truncated_input_is_an_error_not_a_panic() {
        let buf = to_bytes(&[string(2, "hello")]);
        assert!(decode(&buf[..buf.len() - 1]).is_err());
        assert!(decode(&[0x0b]).is_err());
    }
}
