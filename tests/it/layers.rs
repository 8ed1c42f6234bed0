//! The tree is the architecture: no top-level module of `src/` depends,
//! directly or through others, on a module that depends on it. Read from
//! the `crate::` paths of non-test code (`use` trees and paths alike), so a
//! new cycle fails here with the file and path that made it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// Edges between top-level modules: (from, to) -> where one was seen.
type Edges = BTreeMap<(String, String), String>;

/// The top-level module a file of `src/` belongs to (`None` for the crate
/// roots, which only declare the modules).
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).ok()?;
    let first = rel.components().next()?.as_os_str().to_string_lossy();
    let name = first.strip_suffix(".rs").unwrap_or(&first).to_string();
    (name != "lib" && name != "main").then_some(name)
}

fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.parse_args::<syn::Meta>()
                .is_ok_and(|m| m.path().is_ident("test"))
    })
}

/// Collects the top-level modules a file names through `crate::`, skipping
/// test-only items, and the files it declares as test-only modules.
struct Uses<'a> {
    from: &'a str,
    /// The file, absolute (to find the files it declares) ...
    file: &'a Path,
    /// ... and as shown in a failure.
    shown: &'a str,
    edges: &'a mut Edges,
    test_files: &'a mut BTreeSet<PathBuf>,
}

impl Uses<'_> {
    fn add(&mut self, to: &str, shown: String) {
        if to != self.from {
            self.edges
                .entry((self.from.to_string(), to.to_string()))
                .or_insert_with(|| format!("{}: {shown}", self.shown));
        }
    }
}

impl<'ast> Visit<'ast> for Uses<'_> {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs = match item {
            syn::Item::Mod(m) => &m.attrs,
            syn::Item::Fn(f) => &f.attrs,
            syn::Item::Impl(i) => &i.attrs,
            syn::Item::Use(u) => &u.attrs,
            syn::Item::Struct(s) => &s.attrs,
            syn::Item::Enum(e) => &e.attrs,
            syn::Item::Const(c) => &c.attrs,
            syn::Item::Static(s) => &s.attrs,
            syn::Item::Trait(t) => &t.attrs,
            syn::Item::Type(t) => &t.attrs,
            _ => &Vec::new(),
        };
        if is_cfg_test(attrs) {
            if let syn::Item::Mod(m) = item
                && m.content.is_none()
            {
                let dir = self.file.parent().unwrap();
                let stem = self.file.file_stem().unwrap();
                // `mod x;` in a/mod.rs or a.rs lives in a/x.rs.
                let base = if stem == "mod" || stem == "lib" || stem == "main" {
                    dir.to_path_buf()
                } else {
                    dir.join(stem)
                };
                let name = m.ident.to_string();
                self.test_files.insert(base.join(format!("{name}.rs")));
                self.test_files.insert(base.join(name).join("mod.rs"));
            }
            return;
        }
        syn::visit::visit_item(self, item);
    }

    fn visit_impl_item(&mut self, item: &'ast syn::ImplItem) {
        if let syn::ImplItem::Fn(f) = item
            && is_cfg_test(&f.attrs)
        {
            return;
        }
        syn::visit::visit_impl_item(self, item);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let mut segs = path.segments.iter();
        if let (Some(first), Some(second)) = (segs.next(), segs.next())
            && first.ident == "crate"
        {
            let to = second.ident.to_string();
            self.add(&to, format!("crate::{to}…"));
        }
        syn::visit::visit_path(self, path);
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        if let syn::UseTree::Path(p) = &item.tree
            && p.ident == "crate"
        {
            let mut targets = Vec::new();
            collect_heads(&p.tree, &mut targets);
            for to in targets {
                self.add(&to, format!("use crate::{to}…"));
            }
        }
    }
}

/// The first segment of every path in a `use crate::{…}` tree.
fn collect_heads(tree: &syn::UseTree, out: &mut Vec<String>) {
    match tree {
        syn::UseTree::Path(p) => out.push(p.ident.to_string()),
        syn::UseTree::Name(n) => out.push(n.ident.to_string()),
        syn::UseTree::Rename(r) => out.push(r.ident.to_string()),
        syn::UseTree::Group(g) => g.items.iter().for_each(|t| collect_heads(t, out)),
        syn::UseTree::Glob(_) => {}
    }
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every edge of the source tree, test-only code left out.
fn edges(src: &Path) -> Edges {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let parsed: Vec<(PathBuf, syn::File)> = files
        .into_iter()
        .map(|file| {
            let text = std::fs::read_to_string(&file).unwrap();
            let ast = syn::parse_file(&text)
                .unwrap_or_else(|e| panic!("{} does not parse: {e}", file.display()));
            (file, ast)
        })
        .collect();
    // Two passes: which files are test-only modules is known only once
    // every declaration has been read.
    let mut test_files = BTreeSet::new();
    let mut edges = Edges::new();
    for pass in 0..2 {
        let mut found = Edges::new();
        for (file, ast) in &parsed {
            if pass == 1 && test_files.contains(file) {
                continue;
            }
            let from = module_of(src, file).unwrap_or_default();
            let shown = file.strip_prefix(src.parent().unwrap()).unwrap();
            Uses {
                from: &from,
                file,
                shown: &shown.display().to_string(),
                edges: &mut found,
                test_files: &mut test_files,
            }
            .visit_file(ast);
        }
        edges = found;
    }
    edges.retain(|(from, _), _| !from.is_empty());
    edges
}

/// A cycle through `start`, if any, as the modules along it.
fn cycle_from(start: &str, graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn walk(
        at: &str,
        start: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        seen: &mut BTreeSet<String>,
    ) -> bool {
        for next in graph.get(at).into_iter().flatten() {
            if next == start {
                return true;
            }
            if seen.insert(next.clone()) {
                path.push(next.clone());
                if walk(next, start, graph, path, seen) {
                    return true;
                }
                path.pop();
            }
        }
        false
    }
    let mut path = vec![start.to_string()];
    walk(start, start, graph, &mut path, &mut BTreeSet::new()).then_some(path)
}

fn cycles(edges: &Edges) -> Vec<String> {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (from, to) in edges.keys() {
        graph.entry(from.clone()).or_default().insert(to.clone());
    }
    let mut found = Vec::new();
    let mut reported = BTreeSet::new();
    for start in graph.keys() {
        if reported.contains(start) {
            continue;
        }
        if let Some(cycle) = cycle_from(start, &graph) {
            let mut lines = vec![format!("{} -> {start}", cycle.join(" -> "))];
            for pair in cycle.windows(2).chain(std::iter::once(
                &[cycle[cycle.len() - 1].clone(), start.clone()][..],
            )) {
                lines.push(format!(
                    "  {} -> {}: {}",
                    pair[0],
                    pair[1],
                    edges[&(pair[0].clone(), pair[1].clone())]
                ));
            }
            reported.extend(cycle);
            found.push(lines.join("\n"));
        }
    }
    found
}

#[test]
fn no_top_level_module_depends_on_itself_through_others() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let edges = edges(&src);
    // The reader itself works: the tree has edges (else a parse change could
    // make this pass on nothing).
    assert!(
        edges.contains_key(&("cmd".into(), "store".into())),
        "cmd -> store not found: {:?}",
        edges.keys().collect::<Vec<_>>()
    );
    let found = cycles(&edges);
    assert!(
        found.is_empty(),
        "cycles between modules:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_reader_finds_a_cycle_and_skips_test_code() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(src.join("b")).unwrap();
    std::fs::write(src.join("lib.rs"), "mod a; mod b;").unwrap();
    std::fs::write(
        src.join("a.rs"),
        "use crate::b::X;\n#[cfg(test)] mod t { use crate::c; }",
    )
    .unwrap();
    std::fs::write(
        src.join("b/mod.rs"),
        "#[cfg(test)] mod tests;\npub fn f() { crate::a::g(); }",
    )
    .unwrap();
    std::fs::write(src.join("b/tests.rs"), "use crate::d;").unwrap();
    let edges = edges(&src);
    let keys: Vec<_> = edges.keys().cloned().collect();
    assert_eq!(
        keys,
        [("a".into(), "b".into()), ("b".into(), "a".into())],
        "test-only code (a's mod t, b/tests.rs) adds no edge"
    );
    let found = cycles(&edges);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].starts_with("a -> b -> a"), "{}", found[0]);
}
