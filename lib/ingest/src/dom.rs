//! A minimal DOM for html5ever to build: nodes in one vector, linked by index.
//!
//! html5ever is only a parser; it builds its tree through the [`TreeSink`] trait. Servo's
//! own DOM for it (`markup5ever_rcdom`) is published "for tests only", and `scraper` brings
//! CSS selectors we do not use, so this is the small tree the HTML reader needs: elements
//! (their names, not their attributes) and text. Comments, doctypes and processing
//! instructions become inert nodes. Links are indices, so moving a node (which the parser
//! does for misnested tags and tables) is O(1), and dropping the tree is a flat vector free
//! (no recursion however deep the document nests).

use std::borrow::Cow;
use std::cell::{Cell, RefCell};

use html5ever::interface::{ElemName, ElementFlags, NodeOrText, QuirksMode, TreeSink};
use html5ever::tendril::{StrTendril, TendrilSink};
use html5ever::{parse_document, Attribute, LocalName, Namespace, ParseOpts, QualName};

/// A node's index in [`Tree::nodes`]; the document is 0.
pub(crate) type Id = usize;

/// What a node is.
#[derive(Debug)]
pub(crate) enum Data {
    /// The document, and a template's contents (a fragment kept out of the tree).
    Document,
    /// An element, by name.
    Element {
        /// Its namespace and local name.
        name: QualName,
        /// A `<template>`'s contents, which are not its children.
        template: Option<Id>,
        /// See [`TreeSink::is_mathml_annotation_xml_integration_point`].
        mathml_annotation_xml_integration_point: bool,
    },
    /// Text, entities decoded.
    Text(StrTendril),
    /// A comment or a processing instruction: never visible.
    Other,
}

/// One node and its links.
#[derive(Debug)]
pub(crate) struct Node {
    /// What the node is.
    pub(crate) data: Data,
    parent: Option<Id>,
    prev: Option<Id>,
    pub(crate) next: Option<Id>,
    pub(crate) first_child: Option<Id>,
    last_child: Option<Id>,
}

/// A parsed HTML document.
#[derive(Debug)]
pub(crate) struct Tree {
    /// Every node created, the document first; those detached by the parser stay, unlinked.
    pub(crate) nodes: Vec<Node>,
    /// The first limit exceeded, if one was.
    exceeded: Option<Exceeded>,
}

impl Tree {
    /// The node `id`.
    pub(crate) fn node(&self, id: Id) -> &Node {
        &self.nodes[id]
    }

    /// The parent of `id`, if it is in the tree.
    pub(crate) fn parent(&self, id: Id) -> Option<Id> {
        self.nodes[id].parent
    }

    /// The concatenated text of `id`'s text children (for `<title>`, whose content is text).
    pub(crate) fn child_text(&self, id: Id) -> String {
        let mut text = String::new();
        let mut child = self.nodes[id].first_child;
        while let Some(c) = child {
            if let Data::Text(t) = &self.nodes[c].data {
                text.push_str(t);
            }
            child = self.nodes[c].next;
        }
        text
    }
}

/// The deepest an element may nest (the root `html` is at depth 1), as in Chromium and
/// WebKit's parsers.
pub(crate) const MAX_DEPTH: usize = 512;

/// How many nodes a document may build per byte of its source (plus [`NODES_BASE`]).
///
/// A tag is 3 bytes or more and text 1 or more, so a document builds fewer nodes than it has
/// bytes, but for those the parser adds: the html, head and body elements, a table's
/// implied tbody and tr, and the formatting elements (`<b>`, `<font>`…) left open, which it
/// re-opens in every following paragraph. That last one has no bound: 500 distinct `<b>`
/// left open in a `<p>` are rebuilt for every later `<p>x</p>`, 500 elements per 8 bytes
/// (a megabyte would build 60 million nodes, gigabytes).
pub(crate) const NODES_PER_BYTE: usize = 2;

/// The nodes allowed whatever the size (a one-letter document already has five).
const NODES_BASE: usize = 1024;

/// How much input the parser is given at a time; the limits are checked between pieces.
const PIECE: usize = 4096;

/// Why a document was not built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Exceeded {
    /// An element nested deeper than [`MAX_DEPTH`].
    Depth,
    /// More nodes than [`NODES_PER_BYTE`] allows.
    Nodes,
}

/// Parses `html` as a whole document, as a browser would (malformed HTML is recovered from
/// per the HTML5 specification), unless it exceeds a limit.
///
/// html5ever has no limits of its own, and two shapes of input cost far more than their
/// size: its tree builder scans the stack of open elements for most start tags, so time
/// grows with the square of the nesting depth (servo/html5ever#788: half a megabyte of
/// `<ul><li>` takes minutes), and formatting elements left open are rebuilt again and
/// again (see [`NODES_PER_BYTE`]). So the input is fed in pieces, the sink notes the first
/// element inserted deeper than [`MAX_DEPTH`] or past the node limit, and parsing stops at
/// the end of that piece, having built at most one piece's worth beyond the limit.
pub(crate) fn parse(html: &str) -> Result<Tree, Exceeded> {
    let max_nodes = html.len().saturating_mul(NODES_PER_BYTE).saturating_add(NODES_BASE);
    let mut parser = parse_document(Sink::new(max_nodes), ParseOpts::default());
    let mut rest = html;
    while !rest.is_empty() {
        let mut end = rest.len().min(PIECE);
        while !rest.is_char_boundary(end) {
            end += 1;
        }
        let (piece, after) = rest.split_at(end);
        parser.process(StrTendril::from_slice(piece));
        if let Some(exceeded) = parser.tokenizer.sink.sink.exceeded.get() {
            return Err(exceeded);
        }
        rest = after;
    }
    let tree = parser.finish();
    match tree.exceeded {
        Some(exceeded) => Err(exceeded),
        None => Ok(tree),
    }
}

/// An element's name as [`TreeSink::elem_name`] returns it: owned (atoms are cheap to
/// clone), so no borrow of the node vector outlives the call.
#[derive(Debug)]
pub(crate) struct Name(QualName);

impl ElemName for Name {
    fn ns(&self) -> &Namespace {
        &self.0.ns
    }

    fn local_name(&self) -> &LocalName {
        &self.0.local
    }
}

/// The tree being built.
struct Sink {
    nodes: RefCell<Vec<Node>>,
    /// The most nodes this document may build.
    max_nodes: usize,
    /// The first limit exceeded.
    exceeded: Cell<Option<Exceeded>>,
}

impl Sink {
    fn new(max_nodes: usize) -> Sink {
        Sink { nodes: RefCell::new(vec![new_node(Data::Document)]), max_nodes, exceeded: Cell::new(None) }
    }

    /// Notes whether the node `id`, just linked, exceeds a limit: the node count, or (for an
    /// element) the depth. Its ancestors are counted anew each time (at most `MAX_DEPTH + 1`
    /// steps): the parser moves subtrees, so a depth stored on a node would go stale.
    fn check_limits(&self, nodes: &[Node], id: Id) {
        if nodes.len() > self.max_nodes {
            self.exceeded.set(Some(Exceeded::Nodes));
        }
        if !matches!(nodes[id].data, Data::Element { .. }) {
            return;
        }
        let mut depth = 0;
        let mut at = id;
        while let Some(parent) = nodes[at].parent {
            depth += 1;
            if depth > MAX_DEPTH {
                self.exceeded.set(Some(Exceeded::Depth));
                return;
            }
            at = parent;
        }
    }
}

fn new_node(data: Data) -> Node {
    Node { data, parent: None, prev: None, next: None, first_child: None, last_child: None }
}

fn push(nodes: &mut Vec<Node>, data: Data) -> Id {
    nodes.push(new_node(data));
    nodes.len() - 1
}

/// Unlinks `id` from its parent and siblings (nothing if it has no parent).
fn detach(nodes: &mut [Node], id: Id) {
    let Some(parent) = nodes[id].parent.take() else { return };
    let (prev, next) = (nodes[id].prev.take(), nodes[id].next.take());
    match prev {
        Some(p) => nodes[p].next = next,
        None => nodes[parent].first_child = next,
    }
    match next {
        Some(n) => nodes[n].prev = prev,
        None => nodes[parent].last_child = prev,
    }
}

/// Links the detached `id` as `parent`'s last child.
fn link_last(nodes: &mut [Node], parent: Id, id: Id) {
    let last = nodes[parent].last_child;
    nodes[id].parent = Some(parent);
    nodes[id].prev = last;
    match last {
        Some(l) => nodes[l].next = Some(id),
        None => nodes[parent].first_child = Some(id),
    }
    nodes[parent].last_child = Some(id);
}

/// Links the detached `id` just before `sibling`, which has a parent.
fn link_before(nodes: &mut [Node], sibling: Id, parent: Id, id: Id) {
    let prev = nodes[sibling].prev;
    nodes[id].parent = Some(parent);
    nodes[id].prev = prev;
    nodes[id].next = Some(sibling);
    nodes[sibling].prev = Some(id);
    match prev {
        Some(p) => nodes[p].next = Some(id),
        None => nodes[parent].first_child = Some(id),
    }
}

/// Adds `text` to the text node `at`, if it is one (the parser wants adjacent text merged).
fn merge_text(nodes: &mut [Node], at: Option<Id>, text: &StrTendril) -> bool {
    match at.map(|a| &mut nodes[a].data) {
        Some(Data::Text(existing)) => {
            existing.push_tendril(text);
            true
        }
        _ => false,
    }
}

impl TreeSink for Sink {
    type Handle = Id;
    type Output = Tree;
    type ElemName<'a> = Name;

    fn finish(self) -> Tree {
        Tree { nodes: self.nodes.into_inner(), exceeded: self.exceeded.get() }
    }

    fn parse_error(&self, _msg: Cow<'static, str>) {}

    fn get_document(&self) -> Id {
        0
    }

    fn elem_name<'a>(&'a self, target: &'a Id) -> Name {
        match &self.nodes.borrow()[*target].data {
            Data::Element { name, .. } => Name(name.clone()),
            // The parser only asks for elements' names; an empty name matches no tag.
            _ => Name(QualName::new(None, Namespace::from(""), LocalName::from(""))),
        }
    }

    fn create_element(&self, name: QualName, _attrs: Vec<Attribute>, flags: ElementFlags) -> Id {
        let nodes = &mut *self.nodes.borrow_mut();
        let template = flags.template.then(|| push(nodes, Data::Document));
        let mathml_annotation_xml_integration_point = flags.mathml_annotation_xml_integration_point;
        push(nodes, Data::Element { name, template, mathml_annotation_xml_integration_point })
    }

    fn create_comment(&self, _text: StrTendril) -> Id {
        push(&mut self.nodes.borrow_mut(), Data::Other)
    }

    fn create_pi(&self, _target: StrTendril, _data: StrTendril) -> Id {
        push(&mut self.nodes.borrow_mut(), Data::Other)
    }

    fn append(&self, parent: &Id, child: NodeOrText<Id>) {
        let nodes = &mut *self.nodes.borrow_mut();
        let id = match child {
            NodeOrText::AppendText(text) => {
                let last = nodes[*parent].last_child;
                if merge_text(nodes, last, &text) {
                    return;
                }
                push(nodes, Data::Text(text))
            }
            NodeOrText::AppendNode(id) => {
                detach(nodes, id);
                id
            }
        };
        link_last(nodes, *parent, id);
        self.check_limits(nodes, id);
    }

    fn append_based_on_parent_node(&self, element: &Id, prev_element: &Id, child: NodeOrText<Id>) {
        if self.nodes.borrow()[*element].parent.is_some() {
            self.append_before_sibling(element, child);
        } else {
            self.append(prev_element, child);
        }
    }

    fn append_doctype_to_document(&self, _name: StrTendril, _public_id: StrTendril, _system_id: StrTendril) {}

    fn get_template_contents(&self, target: &Id) -> Id {
        match &self.nodes.borrow()[*target].data {
            Data::Element { template: Some(contents), .. } => *contents,
            // Only asked of templates, which all have contents; the element itself is a
            // harmless answer otherwise.
            _ => *target,
        }
    }

    fn same_node(&self, x: &Id, y: &Id) -> bool {
        x == y
    }

    fn set_quirks_mode(&self, _mode: QuirksMode) {}

    fn append_before_sibling(&self, sibling: &Id, new_node: NodeOrText<Id>) {
        let nodes = &mut *self.nodes.borrow_mut();
        let id = match new_node {
            NodeOrText::AppendText(text) => {
                let prev = nodes[*sibling].prev;
                if merge_text(nodes, prev, &text) {
                    return;
                }
                push(nodes, Data::Text(text))
            }
            NodeOrText::AppendNode(id) => {
                // Detached first: it may be a sibling of `sibling` already.
                detach(nodes, id);
                id
            }
        };
        match nodes[*sibling].parent {
            Some(parent) => link_before(nodes, *sibling, parent, id),
            // The parser promises a parent; keep the node (its text) rather than lose it.
            None => link_last(nodes, 0, id),
        }
        self.check_limits(nodes, id);
    }

    fn add_attrs_if_missing(&self, _target: &Id, _attrs: Vec<Attribute>) {}

    fn remove_from_parent(&self, target: &Id) {
        detach(&mut self.nodes.borrow_mut(), *target);
    }

    fn reparent_children(&self, node: &Id, new_parent: &Id) {
        if node == new_parent {
            return;
        }
        let nodes = &mut *self.nodes.borrow_mut();
        while let Some(child) = nodes[*node].first_child {
            detach(nodes, child);
            link_last(nodes, *new_parent, child);
        }
    }

    fn is_mathml_annotation_xml_integration_point(&self, handle: &Id) -> bool {
        matches!(self.nodes.borrow()[*handle].data, Data::Element { mathml_annotation_xml_integration_point: true, .. })
    }
}
