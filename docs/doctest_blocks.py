"""A Griffe extension for the API reference: docstring examples (``>>>`` lines and their expected
output, up to a blank line) become ``pycon`` code blocks instead of Markdown block quotes."""

import re

import griffe

FLAGS = re.compile(r"\s*#\s*doctest:.*$")  # directives such as "# doctest: +SKIP" say nothing to a reader


def fenced(text: str) -> str:
    out, in_example = [], False
    for line in text.split("\n"):
        if line.startswith(">>>") and not in_example:
            out += ["", "```pycon"] if out and out[-1].strip() else ["```pycon"]
            in_example = True
        elif in_example and not line.strip():
            out.append("```")
            in_example = False
        out.append(FLAGS.sub("", line) if in_example else line)
    return "\n".join(out + ["```"] if in_example else out)


class DoctestBlocks(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:
        if obj.docstring is not None:
            obj.docstring.value = fenced(obj.docstring.value)
