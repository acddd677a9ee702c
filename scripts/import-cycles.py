#!/usr/bin/env python3
"""Fails when the files of a crate import each other in a circle.

A circle (a.rs uses b.rs, b.rs uses c.rs, c.rs uses a.rs) means none of those files can be read,
tested or moved on its own; the fix is to move the shared type down into a file that both use.
For every crate under crates/, this reads the module tree from lib.rs/main.rs (following `mod x;`
and `#[path]`), collects each file's references to other modules of the crate (`use` declarations
and `crate::…`, `super::…`, `self::…` paths in code), and looks for a cycle between files.

Rules, and why:
* A reference to an item the crate root or a module re-exports (`pub use`) counts as a reference
  to the module that defines it: re-exports are a facade, not a dependency.
* A file's references to its own ancestors are not counted (a submodule is a private part of the
  module that declares it, and `use super::*` in a test module is the usual way to reach it); only
  circles between files that do not contain one another are reported.

  scripts/import-cycles.py              check every crate, print each circle, exit 1 if any
  scripts/import-cycles.py --self-test  check the checker on small crates written to a temp dir
"""
import os
import re
import sys
import tempfile

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def strip(src):
    """Source without comments, string and char literals (so `crate::` in a doc is not a path)."""
    src = re.sub(r"/\*.*?\*/", " ", src, flags=re.S)
    src = re.sub(r'r(#*)".*?"\1', '""', src, flags=re.S)
    src = re.sub(r'"(?:\\.|[^"\\])*"', '""', src, flags=re.S)
    src = re.sub(r"//[^\n]*", "", src)
    return re.sub(r"'(?:\\.|[^'\\\n])'", "' '", src)


def module_tree(root_file):
    """{module path tuple: file}, following `mod x;` declarations and `#[path = …]`."""
    files = {}

    def visit(path, file, is_dir_owner):
        files[path] = file
        src = strip_keep_attrs(open(file, encoding="utf-8").read())
        here = os.path.dirname(file)
        stem = os.path.splitext(os.path.basename(file))[0]
        child_dir = here if is_dir_owner else os.path.join(here, stem)
        for m in re.finditer(r'(#\[path\s*=\s*"([^"]+)"\]\s*)?(?:pub(?:\([^)]*\))?\s+)?mod\s+(' + IDENT + r")\s*;", src):
            explicit, name = m.group(2), m.group(3)
            if explicit:
                visit(path + (name,), os.path.join(here, explicit), False)
                continue
            for cand, owner in ((os.path.join(child_dir, name + ".rs"), False), (os.path.join(child_dir, name, "mod.rs"), True)):
                if os.path.exists(cand):
                    visit(path + (name,), cand, owner)
                    break

    visit((), root_file, True)
    return files


def strip_keep_attrs(src):
    """Like strip, but keeps `#[path = "…"]` strings that the module tree needs."""
    paths = {}

    def keep(m):
        key = "__PATH%d__" % len(paths)
        paths[key] = m.group(0)
        return key

    src = re.sub(r'#\[path\s*=\s*"[^"]+"\]', keep, src)
    src = strip(src)
    for key, text in paths.items():
        src = src.replace(key, text)
    return src


def expand_use(tree):
    """`a::{b::C, d}` → [[a, b, C], [a, d]] (segments only; `as` renames dropped)."""
    tree = re.sub(r"\s+as\s+" + IDENT, "", tree)
    tree = re.sub(r"\s+", "", tree)
    out = []

    def walk(prefix, text):
        depth, start, parts = 0, 0, []
        for i, ch in enumerate(text):
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            elif ch == "," and depth == 0:
                parts.append(text[start:i])
                start = i + 1
        parts.append(text[start:])
        for part in filter(None, parts):
            if "{" in part:
                head, inner = part.split("{", 1)
                walk(prefix + [s for s in head.split("::") if s], inner[: inner.rindex("}")])
            else:
                out.append(prefix + [s for s in part.split("::") if s])

    walk([], tree)
    return out


def references(module, src, children):
    """Absolute module paths (tuples of segments) that `src` of `module` refers to."""
    refs = []
    # inline modules (`mod tests { … }`) shift what `super` and `self` mean inside them
    opens = [(m.end() - 1, m.group(1)) for m in re.finditer(r"\bmod\s+(" + IDENT + r")\s*\{", src)]
    def module_at(pos):
        stack, depth, marks = list(module), 0, []
        opens_at = dict(opens)
        for i in range(pos):
            ch = src[i]
            if ch == "{":
                depth += 1
                if i in opens_at:
                    stack.append(opens_at[i])
                    marks.append(depth)
            elif ch == "}":
                if marks and marks[-1] == depth:
                    marks.pop()
                    stack.pop()
                depth -= 1
        return tuple(stack)

    def resolve(here, segs):
        if segs[0] == "crate":
            return tuple(segs[1:])
        if segs[0] in ("self", "super"):
            base = list(here)
            while segs and segs[0] in ("self", "super"):
                if segs.pop(0) == "super":
                    base = base[:-1]
            return tuple(base + segs)
        if here == module and segs[0] in children:
            return tuple(list(here) + segs)
        return None

    for m in re.finditer(r"\buse\s+([^;]+);", src):
        here = module_at(m.start()) if opens else module
        for segs in expand_use(m.group(1)):
            target = resolve(here, segs) if segs else None
            if target is not None:
                refs.append(target)
    code = re.sub(r"\buse\s+[^;]+;", " ", src)
    for m in re.finditer(r"(?<![:\w])((?:crate|self|super)(?:::" + IDENT + r")+)", code):
        here = module_at(m.start()) if opens else module
        refs.append(resolve(here, m.group(1).split("::")))
    # bare paths through a child module in code (`burst::BurstPhase` in a field's type): the
    # parent reaches into its child without `use`, and that edge closes circles too
    if children:
        for m in re.finditer(r"(?<![:\w])(" + IDENT + r")((?:::" + IDENT + r")+)", code):
            if m.group(1) in children and (module_at(m.start()) if opens else module) == module:
                refs.append(tuple(list(module) + m.group(0).split("::")))
    return refs


def reexports(src, module):
    """{name: absolute path} of a module's `pub use` items (the facade)."""
    out = {}
    for m in re.finditer(r"\bpub(?:\([^)]*\))?\s+use\s+([^;]+);", src):
        for segs in expand_use(m.group(1)):
            if not segs or segs[-1] == "*":
                continue
            if segs[0] in ("crate",):
                path = tuple(segs[1:])
            elif segs[0] in ("self", "super"):
                base = list(module)
                while segs and segs[0] in ("self", "super"):
                    if segs.pop(0) == "super":
                        base = base[:-1]
                path = tuple(base + segs)
            else:
                path = tuple(list(module) + segs)
            out[segs[-1]] = path
    return out


def target_module(path, files, facades, hops=0):
    """The module (file) that defines what `path` names: its longest module prefix, through re-exports."""
    n = len(path)
    while n > 0 and path[:n] not in files:
        n -= 1
    mod = path[:n]
    rest = path[n:]
    if rest and hops < 8 and rest[0] in facades.get(mod, {}):
        return target_module(facades[mod][rest[0]] + rest[1:], files, facades, hops + 1)
    return mod


def cycles_in(root_file):
    files = module_tree(root_file)
    sources = {mod: strip(open(f, encoding="utf-8").read()) for mod, f in files.items()}
    facades = {mod: reexports(src, mod) for mod, src in sources.items()}
    graph = {mod: set() for mod in files}
    for mod, src in sources.items():
        children = {p[-1] for p in files if len(p) == len(mod) + 1 and p[: len(mod)] == mod}
        for ref in references(mod, src, children):
            if ref is None:
                continue
            to = target_module(ref, files, facades)
            if to == mod or mod[: len(to)] == to:
                continue  # itself or an ancestor: see the rules above
            graph[mod].add(to)
    return [[files[m] for m in c] for c in find_cycles(graph)]


def find_cycles(graph):
    """One cycle per strongly connected component with more than one module (Tarjan)."""
    index, low, stack, on, comps = {}, {}, [], set(), []

    def strong(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(comp)

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            strong(v)
    return [one_cycle(graph, set(c)) for c in comps]


def one_cycle(graph, comp):
    """A shortest circle through the component's first module, for a readable message."""
    start = min(comp)
    prev, frontier = {start: None}, [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph[v] & comp):
                if w == start:
                    path = [v]
                    while prev[path[-1]] is not None:
                        path.append(prev[path[-1]])
                    return list(reversed(path)) + [start]
                if w not in prev:
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    return sorted(comp)


def crate_roots(repo):
    base = os.path.join(repo, "crates")
    for crate in sorted(os.listdir(base)):
        for name in ("lib.rs", "main.rs"):
            root = os.path.join(base, crate, "src", name)
            if os.path.exists(root):
                yield root


def check(repo):
    found = 0
    for root in crate_roots(repo):
        for cycle in cycles_in(root):
            found += 1
            rel = [os.path.relpath(f, repo) for f in cycle]
            print("import circle: " + " -> ".join(rel), file=sys.stderr)
    if found:
        print(
            "import-cycles: %d circle(s); move the type the files share into a module both can use" % found,
            file=sys.stderr,
        )
        return 1
    print("import-cycles: no import circle between the files of any crate")
    return 0


def self_test():
    """The checker finds a circle it should, and none where there is none."""
    cases = {
        "circle": {
            "lib.rs": "pub mod a;\npub mod b;\npub mod c;\npub use c::Deep;\n",
            "a.rs": "use crate::b::B;\npub struct A;\n",
            "b.rs": "pub struct B(crate::Deep);\n",
            "c.rs": "pub struct Deep;\nfn f() -> super::a::A { todo!() }\n",
        },
        "bare-path circle": {
            "lib.rs": "pub mod record;\npub mod phases;\n",
            "record.rs": "pub struct Cell { pub p: crate::phases::Phases }\npub enum CellStatus { Ok }\n",
            "phases/mod.rs": "pub mod burst;\npub struct Phases { pub burst: Option<burst::BurstPhase> }\n",
            "phases/burst.rs": "use crate::record::CellStatus;\npub struct BurstPhase(CellStatus);\n",
        },
        "no circle": {
            "lib.rs": "pub mod a;\npub mod b;\npub use b::B;\n// crate::a::A in a comment\n",
            "a.rs": 'use crate::B;\npub struct A;\nconst S: &str = "crate::a";\n#[cfg(test)]\n#[path = "a_tests.rs"]\nmod tests;\n',
            "a_tests.rs": "use super::*;\nmod inner { use super::super::A; }\n",
            "b.rs": "pub struct B;\npub mod sub;\nfn g(_: sub::S) {}\n",
            "b/sub.rs": "pub struct S(super::B);\n",
        },
    }
    failures = 0
    for name, files in cases.items():
        with tempfile.TemporaryDirectory() as tmp:
            for rel, text in files.items():
                path = os.path.join(tmp, "crates", "x", "src", rel)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w", encoding="utf-8") as f:
                    f.write(text)
            got = cycles_in(os.path.join(tmp, "crates", "x", "src", "lib.rs"))
            want = name.endswith("circle") and not name.startswith("no ")
            if bool(got) != want or (want and len(got[0]) != 4):
                print("import-cycles self-test failed: %s: found %r" % (name, got), file=sys.stderr)
                failures += 1
    print("import-cycles self-test: %s" % ("ok" if not failures else "FAILED"))
    return 1 if failures else 0


if __name__ == "__main__":
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if sys.argv[1:] == ["--self-test"]:
        sys.exit(self_test())
    sys.exit(check(repo))
