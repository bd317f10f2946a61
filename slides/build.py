"""Build the deck: slides/deck.md (Marp-style markdown) -> build/slides/index.html, one self-contained file.

    python slides/build.py          # after slides/figures.py (make slides runs both)

- `---` lines separate slides; a front-matter block (`marp: true` …) at the top is skipped;
- `<!-- … -->` comments are the speaker notes (press N to show them);
- `{{name}}` is replaced by numbers.json's text for that key figure (unknown name: an error);
- `![alt](figures/x.png)` embeds build/slides/figures/x.png as a data URI;
- `![alt](recorded:NN_topic)` embeds the first figure of that notebook's recorded run
  (helpers.present.recorded), captioned with where and when it was recorded; without one, a line says so.
No network: CSS and the keyboard navigation are inline, images are data URIs.
"""
from __future__ import annotations

import argparse
import base64
import html
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DECK = ROOT / "slides" / "deck.md"
OUT = ROOT / "build" / "slides"

PLACEHOLDER = re.compile(r"\{\{\s*([a-z0-9_]+)\s*\}\}")
NOTE = re.compile(r"<!--(.*?)-->", re.S)
IMAGE = re.compile(r"!\[([^\]]*)\]\(([^)\s]+)\)")


def split_slides(text: str) -> list[str]:
    """The deck's slides: split on `---` lines, front matter (a first block with `key: value` lines) dropped."""
    parts = re.split(r"^---\s*$", text, flags=re.M)
    if parts and not parts[0].strip():
        parts = parts[1:]
    if parts and re.fullmatch(r"(\s*[a-z_]+:.*\n?)+\s*", parts[0]):
        parts = parts[1:]
    return [p.strip("\n") for p in parts if p.strip()]


def fill(text: str, numbers: dict) -> str:
    """Replace every {{name}} by numbers[name]['text']; ValueError naming unknown placeholders."""
    unknown = sorted({m.group(1) for m in PLACEHOLDER.finditer(text)} - set(numbers))
    if unknown:
        raise ValueError(f"placeholders with no figure in numbers.json: {', '.join(unknown)}")
    return PLACEHOLDER.sub(lambda m: str(numbers[m.group(1)]["text"]), text)


def _data_uri(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode()


def _image(alt: str, target: str, figures: Path) -> str:
    if target.startswith("recorded:"):
        from helpers.present import recorded

        nb = target.split(":", 1)[1]
        rec = recorded.pick(nb)
        figs = rec.figures(nb) if rec else []
        if not figs:
            return f"<p class='missing'>(no recorded run of {html.escape(nb)} yet: <code>make record</code>)</p>"
        return (f"<figure><img alt='{html.escape(alt)}' src='{_data_uri(figs[-1])}'>"
                f"<figcaption>{html.escape(rec.label)}</figcaption></figure>")
    path = figures / Path(target).name
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: run `python slides/figures.py` first (make slides does)")
    return f"<figure><img alt='{html.escape(alt)}' src='{_data_uri(path)}'></figure>"


def render_slide(src: str, numbers: dict, figures: Path) -> tuple[str, str]:
    """(slide HTML, notes HTML) of one slide's markdown."""
    import markdown

    notes = " ".join(n.strip() for n in NOTE.findall(src))
    body = fill(NOTE.sub("", src), numbers)
    images = []

    def stash(m):
        images.append(_image(m.group(1), m.group(2), figures))
        return f"\n\nIMAGE{len(images) - 1}PLACEHOLDER\n\n"

    body = IMAGE.sub(stash, body)
    out = markdown.markdown(body, extensions=["tables"])
    for i, img in enumerate(images):
        out = out.replace(f"<p>IMAGE{i}PLACEHOLDER</p>", img)
    return out, markdown.markdown(fill(notes, numbers))


CSS = """
html,body{margin:0;height:100%;background:#222;font-family:system-ui,-apple-system,Segoe UI,sans-serif}
.slide{display:none;box-sizing:border-box;width:100vw;height:100vh;padding:4vh 6vw;background:#fff;color:#111;
 font-size:clamp(14px,2.3vh,28px);overflow:auto}
.slide.active{display:block}
.slide h1{font-size:2.4em;margin-top:20vh}.slide h2{font-size:1.6em;border-bottom:3px solid #1f77b4;padding-bottom:.2em}
.slide figure{margin:.5em 0;text-align:center}.slide img{max-width:80%;max-height:48vh}
.slide figcaption{font-size:.6em;color:#555}.slide table{border-collapse:collapse;font-size:.85em}
.slide td,.slide th{border:1px solid #ccc;padding:.2em .6em;text-align:left}
.slide code{background:#f2f2f2;padding:0 .2em}.missing{color:#a00;font-size:.7em}
.notes{display:none;position:fixed;bottom:0;left:0;right:0;max-height:30vh;overflow:auto;background:#fffbe6;
 border-top:2px solid #e0c000;padding:.6em 2em;font-size:16px}
body.show-notes .slide.active .notes{display:block}
#count{position:fixed;right:1em;bottom:.5em;color:#888;font-size:14px}
@media print{.slide{display:block;page-break-after:always;height:auto}#count{display:none}}
"""

JS = """
(function(){
 var s=document.querySelectorAll('.slide'),i=0,c=document.getElementById('count');
 function show(n){i=Math.max(0,Math.min(s.length-1,n));s.forEach(function(e,k){e.classList.toggle('active',k===i)});
  c.textContent=(i+1)+' / '+s.length;history.replaceState(null,'','#'+(i+1));}
 document.addEventListener('keydown',function(e){
  if(['ArrowRight','PageDown',' ','ArrowDown'].indexOf(e.key)>=0){show(i+1);e.preventDefault();}
  else if(['ArrowLeft','PageUp','ArrowUp'].indexOf(e.key)>=0){show(i-1);e.preventDefault();}
  else if(e.key==='Home'){show(0);}else if(e.key==='End'){show(s.length-1);}
  else if(e.key==='n'||e.key==='N'){document.body.classList.toggle('show-notes');}});
 document.addEventListener('click',function(e){if(e.target.tagName!=='A')show(e.clientX>innerWidth/3?i+1:i-1);});
 show((parseInt(location.hash.slice(1))||1)-1);
})();
"""


def read_numbers(out: Path) -> dict:
    """numbers.json as slides/figures.py wrote it, or ValueError saying how to make it."""
    path = out / "numbers.json"
    try:
        numbers = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"{path} not found: run `python slides/figures.py` first (make slides does)") from None
    except (OSError, ValueError) as exc:   # unreadable, not UTF-8, not JSON
        raise ValueError(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}; allowed: the JSON "
                         "slides/figures.py writes (run it again)") from None
    if not isinstance(numbers, dict) or not all(isinstance(v, dict) and "text" in v for v in numbers.values()):
        raise ValueError(f"{path} is not what slides/figures.py writes ({{name: {{value, text, source}}}}); "
                         "run it again")
    return numbers


def build(deck: Path | None = None, out: Path | None = None) -> Path:
    deck, out = deck or DECK, out or OUT
    numbers = read_numbers(out)
    sections = []
    for k, src in enumerate(split_slides(deck.read_text())):
        body, notes = render_slide(src, numbers, out / "figures")
        sections.append(f"<section class='slide' id='s{k + 1}'>{body}<aside class='notes'>{notes}</aside></section>")
    page = ("<!doctype html><html lang='en'><head><meta charset='utf-8'><title>LLM Inference at Scale — slides</title>"
            f"<style>{CSS}</style></head><body>\n" + "\n".join(sections)
            + f"\n<div id='count'></div><script>{JS}</script></body></html>\n")
    (out / "index.html").write_text(page)
    return out / "index.html"


def main(argv=None) -> int:
    from helpers.command import CliError, Parser, classify, fail

    ap = Parser(prog="python slides/build.py", description=__doc__,
                formatter_class=argparse.RawDescriptionHelpFormatter)
    try:
        ap.parse_args(argv)
        path = build()
    except (CliError, ValueError, FileNotFoundError) as exc:  # bad input: a placeholder, a figure, numbers.json
        return fail(str(exc))
    except OSError as exc:                                    # the disk
        return fail(*classify(exc))
    print(f"slides: {path} ({path.stat().st_size / 1e6:.1f} MB; arrows to move, N for speaker notes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
