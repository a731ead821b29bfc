#!/usr/bin/env python3
"""Renders the demo's page of text: a few lines in DejaVu fonts on paper
colour, a rule and a little noise, as a binary PPM (P6) image, and the lines
it drew, one per line, beside it (the text a reader should find).

usage: render_page.py OUT.ppm OUT.txt

Needs Pillow and the DejaVu fonts (Debian: python3-pil, fonts-dejavu-core);
`make demo` installs both. Deterministic: the same bytes on every machine
with the same Pillow and fonts."""
import os
import random
import sys

LINES = [
    "Invoice 2026-1204",
    "Deliver to: 17 Harbour Road",
    "Total due: 1,284.50 EUR",
    "Paid by card ending 4821",
    "Thank you for your order",
]
FONT_DIRS = ["/usr/share/fonts/truetype/dejavu"]


def font(name, size):
    from PIL import ImageFont
    for d in FONT_DIRS:
        p = os.path.join(d, name)
        if os.path.exists(p):
            return ImageFont.truetype(p, size)
    sys.exit("render_page.py: the DejaVu font %s was not found in %s (Debian: fonts-dejavu-core)."
             % (name, ", ".join(FONT_DIRS)))


def main(argv):
    if len(argv) != 3:
        sys.exit("usage: render_page.py OUT.ppm OUT.txt")
    try:
        from PIL import Image, ImageDraw
    except ImportError:
        sys.exit("render_page.py: Pillow is missing (Debian: python3-pil).")
    w, h = 800, 480
    img = Image.new("RGB", (w, h), (250, 248, 240))
    d = ImageDraw.Draw(img)
    faces = ["DejaVuSans.ttf", "DejaVuSerif.ttf", "DejaVuSans-Bold.ttf", "DejaVuSansMono.ttf", "DejaVuSans.ttf"]
    sizes = [34, 28, 30, 26, 28]
    y = 40
    for i, text in enumerate(LINES):
        colour = (30, 40, 150) if i == 0 else (20, 20, 20)
        d.text((48, y), text, font=font(faces[i], sizes[i]), fill=colour)
        y += int(sizes[i] * 2.4)
        if i == 0:
            d.line([(40, y - 18), (w - 40, y - 18)], fill=(90, 90, 90), width=2)
    rnd = random.Random(20261203)
    px = img.load()
    for _ in range(w * h // 8):
        x, yy = rnd.randrange(w), rnd.randrange(h)
        r, g, b = px[x, yy]
        n = rnd.randint(-6, 6)
        px[x, yy] = (max(0, min(255, r + n)), max(0, min(255, g + n)), max(0, min(255, b + n)))
    with open(argv[1], "wb") as f:
        f.write(b"P6\n%d %d\n255\n" % (w, h))
        f.write(img.tobytes())
    with open(argv[2], "w") as f:
        f.write("\n".join(LINES) + "\n")


if __name__ == "__main__":
    main(sys.argv)
