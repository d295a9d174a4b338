package tooling

import (
	"slices"
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
