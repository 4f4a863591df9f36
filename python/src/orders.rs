//! Accumulation orders: `Order`, its `Tree`, the presets.

use mxbi::bi::{self};
use mxbi::order::{Order, Tree};
use pyo3::prelude::*;
use pyo3::types::PyString;

use crate::args::{err, parse, str_arg, type_name, usize_arg};
/// An accumulation order (grammar: docs/ORDERS.md). `str()` is its
/// canonical spelling.
#[pyclass(module = "mxbi._mxbi", name = "Order", frozen, eq)]
#[derive(Clone, PartialEq)]
pub(crate) struct PyOrder {
    pub(crate) order: Order,
}

#[pymethods]
impl PyOrder {
    #[new]
    fn new(spec: &Bound<'_, PyAny>) -> PyResult<Self> {
        Ok(PyOrder {
            order: parse(&str_arg(spec, "spec")?)?,
        })
    }
    fn __str__(&self) -> String {
        self.order.to_string()
    }
    fn __repr__(&self) -> String {
        format!("Order('{}')", self.order)
    }
    fn __hash__(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.order.to_string().hash(&mut h);
        h.finish()
    }
    /// The preset this order is, if any (e.g. `hopper-bf16`).
    #[getter]
    fn preset(&self) -> Option<&'static str> {
        self.order.preset_name()
    }
    /// The element type the order's steps read (`f32` for fma/muladd).
    #[getter]
    fn input(&self) -> &'static str {
        bi::input_of(&self.order).name()
    }
    /// The reduction tree for K terms.
    fn tree(&self, k: &Bound<'_, PyAny>) -> PyResult<PyTree> {
        let k = usize_arg(k, "k")?;
        self.order.check_size(k).map_err(err)?;
        Ok(PyTree {
            tree: self.order.compile(k),
        })
    }
    /// The first node where this order's tree and `other`'s differ for K
    /// (the text `mxbi order --diff` prints), or None when they are the same.
    /// `other`: an Order or its spelling.
    fn diff(&self, other: &Bound<'_, PyAny>, k: &Bound<'_, PyAny>) -> PyResult<Option<String>> {
        let other: Order = match other.cast::<PyOrder>() {
            Ok(o) => o.get().order,
            Err(_) => match other.cast::<PyString>() {
                Ok(s) => parse(&s.to_string())?,
                Err(_) => {
                    return Err(err(format!(
                        "other: expected an Order or its spelling, got {}",
                        type_name(other)
                    )))
                }
            },
        };
        let k = usize_arg(k, "k")?;
        self.order.check_size(k).map_err(err)?;
        other.check_size(k).map_err(err)?;
        Ok(self.order.compile(k).diff(&other.compile(k)).map(|d| d.to_string()))
    }
}

/// A compiled reduction tree. `str()` is the compressed view `mxbi order
/// --k` prints; `listing()` every node (`--full`).
#[pyclass(module = "mxbi._mxbi", name = "Tree", frozen)]
pub(crate) struct PyTree {
    pub(crate) tree: Tree,
}

#[pymethods]
impl PyTree {
    fn __str__(&self) -> String {
        self.tree.to_string()
    }
    fn __len__(&self) -> usize {
        self.tree.nodes.len()
    }
    /// Every node, one a line, then `root = %N`.
    fn listing(&self) -> String {
        format!("{}root = %{}\n", self.tree.listing(), self.tree.root)
    }
    #[getter]
    fn root(&self) -> u32 {
        self.tree.root
    }
    #[getter]
    fn k(&self) -> usize {
        self.tree.k
    }
    /// One node described in words.
    fn describe(&self, node: &Bound<'_, PyAny>) -> PyResult<String> {
        let node = usize_arg(node, "node")?;
        if node >= self.tree.nodes.len() {
            return Err(err(format!(
                "node {node} is out of range ({} nodes)",
                self.tree.nodes.len()
            )));
        }
        Ok(self.tree.describe_node(node))
    }
}

/// The named presets: (name, the order it expands to).
#[pyfunction]
pub(crate) fn presets() -> Vec<(&'static str, &'static str)> {
    mxbi::order::PRESETS.to_vec()
}
