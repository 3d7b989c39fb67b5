//! Rewrites the model's attention blocks into onnxruntime's fused `Attention` operator.
//!
//! The shipped all-MiniLM-L6-v2 graph is a PyTorch export of scaled-dot-product attention:
//! separate Q/K/V projections, reshapes and transposes per head, a mask built from a dozen
//! shape and comparison nodes, and `IsNaN`/`Where` guards after every softmax. Profiling
//! showed those guards alone at ~17% of inference time. `com.microsoft.Attention` does the
//! same computation with one packed QKV projection and one kernel per layer.
//!
//! The rewrite is strict: it fires only when each softmax sits in exactly the expected
//! pattern (projections with biases from the same input, the default 1/sqrt(head_size)
//! scale, a padding mask from the `attention_mask` input), and otherwise leaves the model
//! untouched, so a user-supplied model still runs as given. A test checks the fused model
//! gives the same vectors as the original.

use std::collections::{HashMap, HashSet};

use super::proto::{self, Field, Value};
use crate::error::{CoreError, Result};

const FLOAT: i64 = 1;
const INT8: i64 = 3;
const INT32: i64 = 6;
const INT64: i64 = 7;

#[derive(Debug, Clone)]
struct Node {
    inputs: Vec<String>,
    outputs: Vec<String>,
    op: String,
    domain: String,
    other: Vec<Field>,
}

impl Node {
    fn decode(bytes: &[u8]) -> Result<Node> {
        let fields = proto::decode(bytes)?;
        Ok(Node {
            inputs: proto::strings(&fields, 1),
            outputs: proto::strings(&fields, 2),
            op: proto::first_string(&fields, 4),
            domain: proto::first_string(&fields, 7),
            other: fields
                .into_iter()
                .filter(|f| ![1, 2, 4, 7].contains(&f.num))
                .collect(),
        })
    }

    fn encode(&self) -> Vec<u8> {
        let mut fields: Vec<Field> = self.inputs.iter().map(|s| proto::string(1, s)).collect();
        fields.extend(self.outputs.iter().map(|s| proto::string(2, s)));
        fields.push(proto::string(4, &self.op));
        if !self.domain.is_empty() {
            fields.push(proto::string(7, &self.domain));
        }
        fields.extend(self.other.iter().cloned());
        proto::to_bytes(&fields)
    }

    fn new(op: &str, domain: &str, inputs: &[&str], output: &str, other: Vec<Field>) -> Node {
        Node {
            inputs: inputs.iter().map(|s| s.to_string()).collect(),
            outputs: vec![output.to_string()],
            op: op.into(),
            domain: domain.into(),
            other,
        }
    }
}

struct Tensor {
    dims: Vec<i64>,
    data: Vec<f32>,
}

struct Graph {
    nodes: Vec<Node>,
    inits: Vec<(String, Vec<Field>)>,
    inputs: Vec<String>,
    outputs: Vec<String>,
    other: Vec<Field>,
}

fn value_info_name(bytes: &[u8]) -> Result<String> {
    Ok(proto::first_string(&proto::decode(bytes)?, 1))
}

impl Graph {
    fn decode(bytes: &[u8]) -> Result<Graph> {
        let mut g = Graph {
            nodes: Vec::new(),
            inits: Vec::new(),
            inputs: Vec::new(),
            outputs: Vec::new(),
            other: Vec::new(),
        };
        for f in proto::decode(bytes)? {
            match (&f.value, f.num) {
                (Value::Bytes(b), 1) => g.nodes.push(Node::decode(b)?),
                (Value::Bytes(b), 5) => {
                    let fields = proto::decode(b)?;
                    g.inits.push((proto::first_string(&fields, 8), fields));
                }
                (Value::Bytes(b), 11) => {
                    g.inputs.push(value_info_name(b)?);
                    g.other.push(f);
                }
                (Value::Bytes(b), 12) => {
                    g.outputs.push(value_info_name(b)?);
                    g.other.push(f);
                }
                // Shape annotations of intermediate tensors would go stale; drop them.
                (_, 13) => {}
                _ => g.other.push(f),
            }
        }
        Ok(g)
    }

    fn encode(&self) -> Vec<u8> {
        let mut fields: Vec<Field> = self
            .nodes
            .iter()
            .map(|n| proto::bytes(1, n.encode()))
            .collect();
        fields.extend(
            self.inits
                .iter()
                .map(|(_, t)| proto::bytes(5, proto::to_bytes(t))),
        );
        fields.extend(self.other.iter().cloned());
        proto::to_bytes(&fields)
    }

    fn producers(&self) -> HashMap<&str, usize> {
        let mut m = HashMap::new();
        for (i, n) in self.nodes.iter().enumerate() {
            for o in &n.outputs {
                m.insert(o.as_str(), i);
            }
        }
        m
    }

    fn init(&self, name: &str) -> Option<&Vec<Field>> {
        self.inits.iter().find(|(n, _)| n == name).map(|(_, f)| f)
    }

    fn tensor(&self, name: &str) -> Option<Tensor> {
        let t = self.init(name)?;
        let dims = proto::ints(t, 1).ok()?;
        let dtype = proto::ints(t, 2).ok()?.first().copied()?;
        let raw = t.iter().find(|f| f.num == 9).and_then(|f| match &f.value {
            Value::Bytes(b) => Some(b.as_slice()),
            _ => None,
        });
        let data: Vec<f32> = match (dtype, raw) {
            (FLOAT, Some(b)) => b
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().expect("4")))
                .collect(),
            (INT8, Some(b)) => b.iter().map(|&x| f32::from(x as i8)).collect(),
            (INT64, Some(b)) => b
                .chunks_exact(8)
                .map(|c| i64::from_le_bytes(c.try_into().expect("8")) as f32)
                .collect(),
            (FLOAT, None) => t
                .iter()
                .filter(|f| f.num == 4)
                .flat_map(|f| match &f.value {
                    Value::Bytes(b) => b
                        .chunks_exact(4)
                        .map(|c| f32::from_le_bytes(c.try_into().expect("4")))
                        .collect(),
                    Value::Fixed32(b) => vec![f32::from_le_bytes(*b)],
                    _ => Vec::new(),
                })
                .collect(),
            (INT64, None) => proto::ints(t, 7)
                .ok()?
                .into_iter()
                .map(|v| v as f32)
                .collect(),
            _ => return None,
        };
        let expected: i64 = dims.iter().product();
        (data.len() as i64 == expected.max(1) || (dims.is_empty() && data.len() == 1))
            .then_some(Tensor { dims, data })
    }
}

fn float_tensor(name: &str, dims: &[i64], data: &[f32]) -> Vec<Field> {
    let mut f: Vec<Field> = dims.iter().map(|&d| proto::varint(1, d as u64)).collect();
    f.push(proto::varint(2, FLOAT as u64));
    f.push(proto::string(8, name));
    f.push(proto::bytes(
        9,
        data.iter().flat_map(|x| x.to_le_bytes()).collect(),
    ));
    f
}

fn int_attribute(name: &str, v: i64) -> Field {
    proto::bytes(
        5,
        proto::to_bytes(&[
            proto::string(1, name),
            proto::varint(3, v as u64),
            proto::varint(20, 2),
        ]),
    )
}

/// One attention block found in the graph.
struct Block {
    input: String,
    context: String,
    weight: Vec<f32>,
    bias: Vec<f32>,
    hidden: usize,
    num_heads: usize,
}

struct Matcher<'g> {
    g: &'g Graph,
    prod: HashMap<&'g str, usize>,
    consumers: HashMap<&'g str, Vec<usize>>,
}

impl<'g> Matcher<'g> {
    fn new(g: &'g Graph) -> Matcher<'g> {
        let mut consumers: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, n) in g.nodes.iter().enumerate() {
            for inp in &n.inputs {
                consumers.entry(inp.as_str()).or_default().push(i);
            }
        }
        Matcher {
            g,
            prod: g.producers(),
            consumers,
        }
    }

    fn producer(&self, t: &str) -> Option<&'g Node> {
        self.prod.get(t).map(|&i| &self.g.nodes[i])
    }

    /// The single node consuming `t`, if it is an `op`; `IsNaN`/`Where` guards are
    /// looked through (`Where(IsNaN(x), 0, x)` is `x` whenever a row has a valid key).
    fn only_consumer(&self, t: &str, op: &str) -> Option<&'g Node> {
        let users: Vec<&Node> = self
            .consumers
            .get(t)?
            .iter()
            .map(|&i| &self.g.nodes[i])
            .collect();
        let real: Vec<&Node> = users.iter().copied().filter(|n| n.op != "IsNaN").collect();
        match real.as_slice() {
            [n] if n.op == "Where" && n.inputs.get(2).map(String::as_str) == Some(t) => {
                self.only_consumer(&n.outputs[0], op)
            }
            [n] if n.op == op => Some(n),
            _ => None,
        }
    }

    /// A float weight given directly or as `Cast(int8) * scale`.
    fn weight(&self, name: &str) -> Option<Tensor> {
        if let Some(t) = self.g.tensor(name) {
            return Some(t);
        }
        let mul = self.producer(name).filter(|n| n.op == "Mul")?;
        let cast = self.producer(&mul.inputs[0]).filter(|n| n.op == "Cast")?;
        let q = self.g.tensor(&cast.inputs[0])?;
        let scale = self.g.tensor(&mul.inputs[1])?;
        let cols = *q.dims.last()? as usize;
        let data = match scale.data.len() {
            1 => q.data.iter().map(|x| x * scale.data[0]).collect(),
            n if n == cols => q
                .data
                .iter()
                .enumerate()
                .map(|(i, x)| x * scale.data[i % cols])
                .collect(),
            _ => return None,
        };
        Some(Tensor { dims: q.dims, data })
    }

    /// Walks back from a Q, K or V tensor through reshapes, transposes and scalings to
    /// `x @ W + b`; returns (x, W, b, product of scalar scalings, head size if seen).
    fn projection(&self, mut t: &'g str) -> Option<(String, Tensor, Tensor, f32, Option<usize>)> {
        let mut scale = 1.0;
        let mut head = None;
        for _ in 0..10 {
            let n = self.producer(t)?;
            match n.op.as_str() {
                "Mul" => {
                    let c = self.g.tensor(&n.inputs[1]).filter(|c| c.data.len() == 1)?;
                    scale *= c.data[0];
                }
                "Reshape" => {
                    let concat = self.producer(&n.inputs[1]).filter(|c| c.op == "Concat");
                    if let Some(last) = concat
                        .and_then(|c| c.inputs.last())
                        .and_then(|l| self.g.tensor(l))
                    {
                        if last.data.len() == 1 && last.data[0] > 0.0 && head.is_none() {
                            head = Some(last.data[0] as usize);
                        }
                    }
                }
                "Transpose" => {}
                "Add" => {
                    let mm = self.producer(&n.inputs[0]).filter(|m| m.op == "MatMul")?;
                    let bias = self.g.tensor(&n.inputs[1])?;
                    let w = self.weight(&mm.inputs[1])?;
                    return Some((mm.inputs[0].clone(), w, bias, scale, head));
                }
                _ => return None,
            }
            t = &n.inputs[0];
        }
        None
    }

    fn block(&self, softmax: &'g Node) -> Option<Block> {
        let av = self.only_consumer(&softmax.outputs[0], "MatMul")?;
        let tr = self.only_consumer(&av.outputs[0], "Transpose")?;
        let ctx = self.only_consumer(&tr.outputs[0], "Reshape")?;
        let add = self
            .producer(&softmax.inputs[0])
            .filter(|n| n.op == "Add")?;
        let qk = self.producer(&add.inputs[0]).filter(|n| n.op == "MatMul")?;
        let (xq, wq, bq, sq, head) = self.projection(&qk.inputs[0])?;
        let (xk, wk, bk, sk, _) = self.projection(&qk.inputs[1])?;
        let (xv, wv, bv, sv, _) = self.projection(&av.inputs[1])?;
        let hidden = *wq.dims.last()? as usize;
        let head = head?;
        let same_input = xq == xk && xk == xv;
        let shapes_ok = [&wq, &wk, &wv]
            .iter()
            .all(|w| w.dims.len() == 2 && w.dims[1] as usize == hidden)
            && [&bq, &bk, &bv].iter().all(|b| b.data.len() == hidden);
        let scale_ok =
            (sq * sk - 1.0 / (head as f32).sqrt()).abs() < 1e-4 && (sv - 1.0).abs() < 1e-6;
        if !same_input || !shapes_ok || !scale_ok || head == 0 || !hidden.is_multiple_of(head) {
            return None;
        }
        let rows = wq.dims[0] as usize;
        let mut weight = Vec::with_capacity(rows * hidden * 3);
        for r in 0..rows {
            for w in [&wq, &wk, &wv] {
                weight.extend_from_slice(&w.data[r * hidden..(r + 1) * hidden]);
            }
        }
        let bias = [bq.data, bk.data, bv.data].concat();
        Some(Block {
            input: xq,
            context: ctx.outputs[0].clone(),
            weight,
            bias,
            hidden,
            num_heads: hidden / head,
        })
    }
}

/// The fused model, or `None` when the graph does not have the expected shape.
pub fn fuse_attention(model: &[u8]) -> Result<Option<Vec<u8>>> {
    let mut fields = proto::decode(model)?;
    let Some(gi) = fields.iter().position(|f| f.num == 7) else {
        return Ok(None);
    };
    let Value::Bytes(graph_bytes) = &fields[gi].value else {
        return Ok(None);
    };
    let mut g = Graph::decode(graph_bytes)?;
    if !g.inputs.iter().any(|i| i == "attention_mask") {
        return Ok(None);
    }
    let blocks: Vec<Block> = {
        let m = Matcher::new(&g);
        let softmaxes: Vec<&Node> = g.nodes.iter().filter(|n| n.op == "Softmax").collect();
        let found: Vec<Block> = softmaxes.iter().filter_map(|s| m.block(s)).collect();
        if found.is_empty() || found.len() != softmaxes.len() {
            return Ok(None);
        }
        found
    };
    let mask = "backtrail_mask_i32";
    let mut new_nodes = vec![Node::new(
        "Cast",
        "",
        &["attention_mask"],
        mask,
        vec![int_attribute("to", INT32)],
    )];
    let contexts: HashSet<String> = blocks.iter().map(|b| b.context.clone()).collect();
    for (i, b) in blocks.iter().enumerate() {
        let (w, bias) = (
            format!("backtrail_attn{i}_w"),
            format!("backtrail_attn{i}_b"),
        );
        g.inits.push((
            w.clone(),
            float_tensor(
                &w,
                &[
                    b.weight.len() as i64 / (3 * b.hidden as i64),
                    3 * b.hidden as i64,
                ],
                &b.weight,
            ),
        ));
        g.inits.push((
            bias.clone(),
            float_tensor(&bias, &[3 * b.hidden as i64], &b.bias),
        ));
        new_nodes.push(Node::new(
            "Attention",
            "com.microsoft",
            &[&b.input, &w, &bias, mask],
            &b.context,
            vec![int_attribute("num_heads", b.num_heads as i64)],
        ));
    }
    new_nodes.extend(
        g.nodes
            .drain(..)
            .filter(|n| !n.outputs.iter().any(|o| contexts.contains(o))),
    );
    g.nodes = prune_and_sort(new_nodes, &g)?;
    let used: HashSet<&str> = g
        .nodes
        .iter()
        .flat_map(|n| n.inputs.iter().map(String::as_str))
        .collect();
    let used: HashSet<String> = used.into_iter().map(str::to_string).collect();
    g.inits.retain(|(name, _)| used.contains(name));

    fields[gi] = proto::bytes(7, g.encode());
    fields.push(proto::bytes(
        8,
        proto::to_bytes(&[proto::string(1, "com.microsoft"), proto::varint(2, 1)]),
    ));
    Ok(Some(proto::to_bytes(&fields)))
}

/// Keeps the nodes the graph outputs depend on, in an order where every input is produced
/// before it is used (ONNX requires topological order).
fn prune_and_sort(nodes: Vec<Node>, g: &Graph) -> Result<Vec<Node>> {
    let producer: HashMap<&str, usize> = nodes
        .iter()
        .enumerate()
        .flat_map(|(i, n)| n.outputs.iter().map(move |o| (o.as_str(), i)))
        .collect();
    let mut live = vec![false; nodes.len()];
    let mut stack: Vec<&str> = g.outputs.iter().map(String::as_str).collect();
    while let Some(t) = stack.pop() {
        if let Some(&i) = producer.get(t) {
            if !live[i] {
                live[i] = true;
                stack.extend(nodes[i].inputs.iter().map(String::as_str));
            }
        }
    }
    let mut ready: HashSet<String> = g.inputs.iter().cloned().collect();
    ready.extend(g.inits.iter().map(|(n, _)| n.clone()));
    ready.insert(String::new());
    let mut pending: Vec<Node> = nodes
        .into_iter()
        .zip(live)
        .filter(|(_, l)| *l)
        .map(|(n, _)| n)
        .collect();
    let mut sorted = Vec::with_capacity(pending.len());
    while !pending.is_empty() {
        let before = pending.len();
        let (now, later): (Vec<Node>, Vec<Node>) = pending
            .into_iter()
            .partition(|n| n.inputs.iter().all(|i| ready.contains(i)));
        for n in &now {
            ready.extend(n.outputs.iter().cloned());
        }
        sorted.extend(now);
        pending = later;
        if pending.len() == before {
            return Err(CoreError::Model(
                "attention fusion produced a cyclic graph".into(),
            ));
        }
    }
    Ok(sorted)
}
