//! The matrix cells' colours as the browser's cascade picks them from the page's stylesheet:
//! an over-capacity cell must not wear the heat scale's lowest tint, which says "a low value".

/// The stylesheet without its comments.
fn uncommented(css: &str) -> String {
    let mut out = String::new();
    let mut rest = css;
    while let Some(start) = rest.find("/*") {
        out.push_str(&rest[..start]);
        rest = rest[start..].find("*/").map_or("", |end| &rest[start + end + 2..]);
    }
    out + rest
}

/// `(selector list, declarations)` of every style rule, at-rule blocks opened.
fn rules(css: &str) -> Vec<(String, String)> {
    uncommented(css)
        .split('}')
        .filter_map(|piece| {
            let mut parts = piece.rsplit('{');
            let body = parts.next()?;
            let selector = parts.next()?;
            Some((selector.trim().to_string(), body.trim().to_string()))
        })
        .collect()
}

/// An element: its tag and classes.
struct El<'a> {
    tag: &'a str,
    classes: &'a [&'a str],
}

/// Whether a compound selector (`td.cell.oc`, `.matrix`, `table`) matches `el`; `None` for
/// selectors this small matcher does not understand (pseudo-classes, attributes, `>`).
fn compound(sel: &str, el: &El) -> Option<bool> {
    if sel.contains([':', '[', '>', '+', '~', '*']) {
        return None;
    }
    let mut parts = sel.split('.');
    let tag = parts.next().unwrap_or("");
    Some((tag.is_empty() || tag == el.tag) && parts.all(|c| el.classes.contains(&c)))
}

/// The specificity `(classes, tags)` of `selector` if it matches `target` inside `ancestors`
/// (outermost first).
fn matches(selector: &str, target: &El, ancestors: &[El]) -> Option<(usize, usize)> {
    let compounds: Vec<&str> = selector.split_whitespace().collect();
    let (last, outer) = compounds.split_last()?;
    if !compound(last, target)? {
        return None;
    }
    let mut from = 0;
    for c in outer {
        let at = ancestors[from..].iter().position(|a| compound(c, a) == Some(true))?;
        from += at + 1;
    }
    let classes = compounds.iter().map(|c| c.matches('.').count()).sum();
    let tags = compounds.iter().filter(|c| !c.starts_with('.')).count();
    Some((classes, tags))
}

/// The declaration of `property` (or of the `background` shorthand that sets it) that wins for
/// a matrix cell with these classes.
fn winning_background(css: &str, classes: &[&str]) -> String {
    let target = El { tag: "td", classes };
    let ancestors =
        [El { tag: "table", classes: &["matrix"] }, El { tag: "tbody", classes: &[] }, El { tag: "tr", classes: &[] }];
    let mut best: Option<((usize, usize), usize, String)> = None;
    for (order, (selectors, body)) in rules(css).into_iter().enumerate() {
        for decl in body.split(';').map(str::trim).filter(|d| d.starts_with("background")) {
            if !(decl.starts_with("background:") || decl.starts_with("background-color:")) {
                continue;
            }
            for sel in selectors.split(',') {
                if let Some(spec) = matches(sel.trim(), &target, &ancestors) {
                    let candidate = (spec, order, decl.to_string());
                    if best.as_ref().is_none_or(|b| (b.0, b.1) <= (candidate.0, candidate.1)) {
                        best = Some(candidate);
                    }
                }
            }
        }
    }
    best.map(|b| b.2).unwrap_or_default()
}

#[test]
fn cells_that_are_not_figures_do_not_wear_the_heat_scale() {
    let css = sm_report::CSS;
    assert!(winning_background(css, &["cell", "v"]).contains("var(--heat-lo)"), "a valid cell is on the heat scale");
    assert!(winning_background(css, &["cell", "v", "hot"]).contains("var(--heat-lo)"));
    let oc = winning_background(css, &["cell", "oc"]);
    assert!(oc.contains("var(--oc-bg)") && !oc.contains("heat"), "over capacity: {oc}");
    let err = winning_background(css, &["cell", "err"]);
    assert!(err.contains("var(--err-bg)"), "error: {err}");
    let nm = winning_background(css, &["cell", "nm"]);
    assert!(nm.contains("transparent"), "not measured: {nm}");
}

/// `#rrggbb` → relative luminance (WCAG).
fn luminance(hex: &str) -> f64 {
    let c = |i: usize| {
        let v = u8::from_str_radix(&hex[i..i + 2], 16).unwrap() as f64 / 255.0;
        if v <= 0.03928 { v / 12.92 } else { ((v + 0.055) / 1.055).powf(2.4) }
    };
    0.2126 * c(1) + 0.7152 * c(3) + 0.0722 * c(5)
}

/// The values of a custom property in the light scheme and then the dark one.
fn values(css: &str, name: &str) -> Vec<String> {
    css.match_indices(&format!("{name}:"))
        .map(|(i, m)| css[i + m.len()..].split(';').next().unwrap().trim().to_string())
        .collect()
}

#[test]
fn the_over_capacity_grey_is_not_a_low_heat_tint() {
    let css = sm_report::CSS;
    let (oc, lo) = (values(css, "--oc-bg"), values(css, "--heat-lo"));
    assert_eq!((oc.len(), lo.len()), (2, 2), "a light and a dark value each");
    for (oc, lo) in oc.iter().zip(&lo) {
        let (a, b) = (luminance(oc), luminance(lo));
        let contrast = (a.max(b) + 0.05) / (a.min(b) + 0.05);
        assert!(contrast >= 1.15, "{oc} against {lo}: contrast {contrast:.2}");
    }
    // and hatched clearly enough to read as "not a value"
    let rule = rules(css).into_iter().find(|(s, _)| s == "td.cell.oc").expect("the over-capacity rule").1;
    let stripe: u32 = rule.split("var(--oc-fg) ").nth(1).and_then(|r| r.split('%').next()).unwrap().parse().unwrap();
    assert!(stripe >= 30, "stripes at {stripe} %");
}
