package tooling

import (
	"slices"
	"strings"
	"testing"
)

func TestImportsOf(t *testing.T) {
	src := `"""A module.

import notthis
"""
import os, sys as system
import xml.dom.minidom
from org.python.core import PyStringMap
from . import sibling
from .rel import x
from __future__ import annotations
try:
    import msvcrt
except ImportError:
    pass

class C:
    import inclass

def f():
    import lazyone
    from lazytwo.sub import y
    mod = importlib.import_module("dynamic")

x = '''
import notthat
'''
import after  # a comment
`
	im := ImportsOf([]byte(src))
	for _, want := range []string{"os", "sys", "xml", "org", "msvcrt", "inclass", "after"} {
		if !slices.Contains(im.Module, want) {
			t.Errorf("module-level %q missing: %v", want, im.Module)
		}
	}
	for _, want := range []string{"lazyone", "lazytwo", "dynamic"} {
		if !slices.Contains(im.Lazy, want) {
			t.Errorf("lazy %q missing: %v", want, im.Lazy)
		}
	}
	for _, not := range []string{"notthis", "notthat", "sibling", "rel", "__future__", "system"} {
		if slices.Contains(im.Module, not) || slices.Contains(im.Lazy, not) {
			t.Errorf("%q taken for an import: %v %v", not, im.Module, im.Lazy)
		}
	}
}

func TestSameRunnerConfig(t *testing.T) {
	pyproject := "[project]\nname = \"calc\"\nversion = \"0.1.0\"\n\n[tool.pytest.ini_options]\naddopts = \"-q\"\n"
	setupCfg := "[metadata]\nname = calc\nversion = 0.1.0\n\n[tool:pytest]\naddopts = -q\n"
	for _, c := range []struct {
		base, old, new string
		same           bool
	}{
		{"pyproject.toml", pyproject, strings.Replace(pyproject, "0.1.0", "0.2.0", 1), true},
		{"pyproject.toml", pyproject, pyproject + "\n[tool.black]\nline-length = 100\n", true},
		{"pyproject.toml", pyproject, strings.Replace(pyproject, `"-q"`, `"-q --co"`, 1), false},
		{"pyproject.toml", "[project]\nname = \"calc\"\n", "[project]\nname = \"calc\"\n[tool.pytest.ini_options]\naddopts = \"--co\"\n", false},
		{"pyproject.toml", pyproject, "not = [toml", false},
		{"setup.cfg", setupCfg, strings.Replace(setupCfg, "0.1.0", "0.2.0", 1), true},
		{"setup.cfg", setupCfg, setupCfg + "addopts2 = -p evil\n", false},
		{"setup.cfg", setupCfg, setupCfg + "# a comment\n", true},
		{"package.json", "{}", "{}", false}, // not a file whose parts are known
	} {
		if got := sameRunnerConfig(c.base, []byte(c.old), []byte(c.new)); got != c.same {
			t.Errorf("%s: %q -> %q: same %v, want %v", c.base, c.old, c.new, got, c.same)
		}
	}
}
