"""`dvc plots show` draws every plot with no internet: the page it writes comes from the
committed template (.dvc/plots/offline.html, plots.html_template in .dvc/config), which
inlines vega, vega-lite and vega-embed. The browser tests open the written page in a real
headless Chromium that lets nothing but local files load, on the committed reports/."""

import importlib.util
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from support.processes import GIT_IDENTITY, child_json, dvc, subprocess_env
from support.project import ROOT
from support.servers import CHROMIUM, CHROMIUM_ARGS

TEMPLATE = ROOT / ".dvc" / "plots" / "offline.html"
LOCAL_SCHEMES = ("file:", "data:", "blob:", "about:")


def builder():
    """scripts/build_plots_template.py as a module: its pins are what the template must hold."""
    path = ROOT / "scripts" / "build_plots_template.py"
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def plots_in_dvc_yaml(dvc_yaml: Path) -> dict[str, list[str]]:
    """Every plot dvc.yaml defines, the top-level ones and each stage's per item: its name and
    the files it reads (a stage's plot is its file; a top-level one reads its y's, or its name)."""
    spec = yaml.safe_load(dvc_yaml.read_text())
    plots = {}
    for plot in spec.get("plots", []):
        name, props = next(iter(plot.items())) if isinstance(plot, dict) else (plot, {})
        y = (props or {}).get("y")
        plots[name] = list(y) if isinstance(y, dict) else [name]
    for stage in spec["stages"].values():
        body = stage.get("do", stage)
        for item in stage.get("foreach", [None]):
            for plot in body.get("plots", []):
                path = next(iter(plot)) if isinstance(plot, dict) else plot
                path = path if item is None else path.replace("${item}", item)
                plots[path] = [path]
    return plots


def test_committed_template_holds_the_pinned_libraries_and_their_licences_and_is_configured():
    """The template holds vega, vega-lite and vega-embed at the generator's pins, each with its
    licence, loads nothing from elsewhere, survives dvc_render's filling intact, is tracked,
    and is what plots.html_template resolves to (DVC joins a relative path to .dvc/)."""
    from dvc.config import Config
    from dvc_render.html import HTML

    page = TEMPLATE.read_text(encoding="utf-8")
    for name, version, path, _ in builder().PACKAGES:
        header = f"/*! {name} {version} (npm: {name}@{version}, {path})\nLICENSE of {name}:\n\n"
        assert page.count(header) == 1, name
        licence = page.split(header, 1)[1].split("*/", 1)[0]
        assert licence.startswith("Copyright (c) 2015") and "Interactive Data Lab" in licence, name
        assert "Redistribution and use in source and binary forms" in licence
        assert "EVEN IF ADVISED OF THE POSSIBILITY OF SUCH DAMAGE." in licence
    assert page.count("<script>") == 3 and "<script src" not in page and "sourceMappingURL" not in page
    assert "{scripts}" not in page  # it would bring back DVC's CDN tags
    filled = HTML(page, refresh_seconds=5).with_element("<div>plot</div>").embed()
    head, body = page.split("{plot_divs}")
    assert filled.startswith(head.replace("{refresh_tag}", '<meta http-equiv="refresh" content="5">'))
    assert filled.endswith(body) and "<div>plot</div>" in filled

    configured = Config(dvc_dir=str(ROOT / ".dvc")).load_one("repo")["plots"]["html_template"]
    assert not os.path.isabs(configured)  # so a clone finds it too
    assert Path(os.path.join(ROOT / ".dvc", configured)).resolve() == TEMPLATE  # as `dvc plots` joins it
    ignored = subprocess.run(["git", "check-ignore", "-q", str(TEMPLATE)], cwd=ROOT).returncode
    assert ignored == 1, "the template must be tracked"
    assert subprocess.run(["git", "check-ignore", "-q", "dvc_plots/index.html"], cwd=ROOT).returncode == 0


@pytest.fixture(scope="module")
def shown(tmp_path_factory):
    """A fresh git + DVC repository holding this project's dvc.yaml, params, DVC config, the
    template and the committed plot files; the plain `dvc plots show` run in it, and the same
    with DVC's own page (dvc_render's default) written to default_plots/."""
    from dvc_render.html import PAGE_HTML

    repo = tmp_path_factory.mktemp("plots") / "project"
    repo.mkdir()
    env = subprocess_env(**GIT_IDENTITY)
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, env=env, check=True)
    dvc("init", "-q", cwd=repo, env=env)
    plots = plots_in_dvc_yaml(ROOT / "dvc.yaml")
    files = ["dvc.yaml", "params.yaml", ".dvc/config", str(TEMPLATE.relative_to(ROOT))]
    for name in files + sorted({f for read in plots.values() for f in read}):
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, repo / name)
    listed = child_json(dvc("plots", "show", "--json", cwd=repo, env=env))
    assert not listed.get("errors"), listed["errors"]
    dvc("plots", "show", cwd=repo, env=env)
    (repo / "default.html").write_text(PAGE_HTML, encoding="utf-8")
    dvc("plots", "show", "--html-template", "default.html", "-o", "default_plots", cwd=repo, env=env)
    kinds = {name: {entry["type"] for entry in entries} for name, entries in listed["data"].items()}
    return {"repo": repo, "names": list(plots), "kinds": kinds}


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


# Before the page's scripts: keep the view vega-embed makes for each element, so that its
# scenegraph can be read (DVC's page drops the promise vegaEmbed returns).
KEEP_VIEWS = """window.__views = {};
let embed;
Object.defineProperty(window, "vegaEmbed", {configurable: true, get: () => embed, set: fn => {
    embed = Object.assign((el, ...rest) => fn(el, ...rest).then(result => {
        window.__views[String(el).replace(/^#/, "")] = result.view;
        return result;
    }), fn);
}});"""

# Per Vega div DVC wrote: whether vega-embed drew a canvas or SVG into it, how many data items
# its scene holds (marks of role "mark": lines' points, heatmap cells; not axes or legends),
# and how many coloured pixels its canvas holds (Vega draws axes, grid and text in greys).
DRAWN = """ids => ids.map(id => {
    const div = document.getElementById(id), view = window.__views && window.__views[id];
    const canvas = div && div.querySelector("canvas.marks"), svg = div && div.querySelector("svg.marks");
    let items = 0, coloured = 0;
    const visit = mark => {
        if (mark.role === "mark" && mark.marktype !== "group") items += mark.items.length;
        for (const item of mark.items || []) for (const child of item.items || []) visit(child);
    };
    if (view) visit(view.scenegraph().root);
    if (canvas && canvas.width && canvas.height) {
        const px = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data;
        for (let i = 0; i < px.length; i += 4) {
            const [r, g, b, a] = [px[i], px[i + 1], px[i + 2], px[i + 3]];
            if (a > 0 && Math.max(r, g, b) - Math.min(r, g, b) > 40) coloured++;
        }
    }
    if (svg) coloured = svg.querySelectorAll("g.role-mark path, g.role-mark line, g.role-mark rect").length;
    return {id, drawn: !!(canvas || svg), items, coloured};
})"""

DONE = "p => p.drawn && p.items > 0 && p.coloured > 0"


def open_offline(browser, index: Path, vega_ids: list[str], seconds: float) -> dict:
    """Open `index` with every request that is not for a local file aborted and recorded; what
    the page drew after at most `seconds` of waiting for all Vega plots."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    aborted, sent, errors = [], [], []

    def route(route):
        if route.request.url.startswith(LOCAL_SCHEMES):
            route.continue_()
        else:
            aborted.append(route.request.url)
            route.abort()

    context.route("**/*", route)
    context.add_init_script(KEEP_VIEWS)
    page = context.new_page()
    page.on("request", lambda r: None if r.url.startswith(LOCAL_SCHEMES) else sent.append(r.url))
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(index.as_uri(), wait_until="load")
    try:
        page.wait_for_function(f"ids => ({DRAWN})(ids).every({DONE})", arg=vega_ids, timeout=seconds * 1000)
    except PlaywrightTimeout:
        pass
    drawn = page.evaluate(DRAWN, vega_ids)
    images = page.evaluate("""() => Array.from(document.images).map(
        i => ({src: i.getAttribute("src"), loaded: i.complete && i.naturalWidth > 0}))""")
    context.close()
    return {"drawn": drawn, "images": images, "errors": errors, "aborted": aborted, "sent": sent}


def vega_ids_of(index: Path) -> list[str]:
    return re.findall(r"vegaEmbed\('#([^']+)'", index.read_text(encoding="utf-8"))


@pytest.mark.slow
@pytest.mark.browser
def test_plain_dvc_plots_show_draws_every_plot_offline(shown, browser):
    """Every plot dvc.yaml defines is on the page DVC wrote and drawn there, Vega charts and
    images alike (the learning curves among them), with no request off the machine and no
    JavaScript error."""
    repo, names, kinds = shown["repo"], shown["names"], shown["kinds"]
    assert sorted(kinds) == sorted(names) and all(len(k) == 1 for k in kinds.values()), kinds
    vega = [n for n, k in kinds.items() if k == {"vega"}]
    images = [n for n, k in kinds.items() if k == {"image"}]
    assert len(vega) + len(images) == len(names) and vega and images
    assert {n for n in images if n.endswith("learning_curves.png")} == {
        n for n in names if n.endswith("learning_curves.png")
    }

    index = repo / "dvc_plots" / "index.html"
    ids = vega_ids_of(index)
    assert len(ids) == len(vega)
    seen = open_offline(browser, index, ids, seconds=60)
    assert seen["aborted"] == [] and seen["sent"] == []
    assert seen["errors"] == []
    assert all(p["drawn"] and p["items"] > 0 and p["coloured"] > 0 for p in seen["drawn"]), seen["drawn"]
    assert len(seen["images"]) == len(images)
    assert all(i["loaded"] and not i["src"].startswith(("http:", "https:")) for i in seen["images"]), seen["images"]


@pytest.mark.slow
@pytest.mark.browser
def test_dvcs_own_page_draws_no_vega_plot_offline(shown, browser):
    """The check can fail: DVC's default page, opened the same way, asks the CDN for the three
    libraries (aborted), and none of its Vega charts is drawn; its images still load."""
    index = shown["repo"] / "default_plots" / "index.html"
    ids = vega_ids_of(index)
    assert ids
    seen = open_offline(browser, index, ids, seconds=1)
    assert len(seen["aborted"]) == 3 and all("cdn.jsdelivr.net" in url for url in seen["aborted"])
    assert not any(p["drawn"] or p["items"] or p["coloured"] for p in seen["drawn"]), seen["drawn"]
    assert seen["errors"] and all("vegaEmbed" in e for e in seen["errors"]), seen["errors"]
    assert seen["images"] and all(i["loaded"] for i in seen["images"])
