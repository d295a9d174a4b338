package recipe

import (
	"embed"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strings"

	"github.com/pelletier/go-toml/v2"
)

//go:embed recipes/*.toml
var shipped embed.FS

// Catalog is the recipes known by name: the shipped ones, with a user's
// own from the config file added or put in their place. It is immutable
// once made.
type Catalog struct {
	recipes map[string]*Recipe
}

// Builtin returns the catalog of the recipes shipped in the binary.
func Builtin() (*Catalog, error) {
	c := &Catalog{recipes: map[string]*Recipe{}}
	files, err := fs.Glob(shipped, "recipes/*.toml")
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		data, err := shipped.ReadFile(f)
		if err != nil {
			return nil, err
		}
		r, err := Parse(data, "built in "+f)
		if err != nil {
			return nil, err
		}
		r.Source = "built in"
		if want := strings.TrimSuffix(strings.TrimPrefix(f, "recipes/"), ".toml"); r.Name != want {
			return nil, fmt.Errorf("%w %s: name %q differs from its file's", ErrRecipe, f, r.Name)
		}
		c.recipes[r.Name] = r
	}
	return c, nil
}

// With returns a catalog with the config file's [agents] tables added,
// each a recipe named by its key (a name = in it must agree); one named
// like a shipped recipe takes its place. where names the file in errors.
func (c *Catalog) With(tables map[string]any, where string) (*Catalog, error) {
	out := &Catalog{recipes: maps.Clone(c.recipes)}
	for _, key := range slices.Sorted(maps.Keys(tables)) {
		tbl, ok := tables[key].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%w %s: agents.%s: want a table", ErrRecipe, where, key)
		}
		if n, ok := tbl["name"]; ok && n != key {
			return nil, fmt.Errorf("%w %s: agents.%s: name %v differs from its key", ErrRecipe, where, key, n)
		}
		tbl = maps.Clone(tbl)
		tbl["name"] = key
		data, err := toml.Marshal(tbl)
		if err != nil {
			return nil, fmt.Errorf("%w %s: agents.%s: %v", ErrRecipe, where, key, err)
		}
		r, err := Parse(data, where+" [agents."+key+"]")
		if err != nil {
			return nil, err
		}
		out.recipes[key] = r
	}
	return out, nil
}

// Lookup returns the recipe of that name.
func (c *Catalog) Lookup(name string) (*Recipe, error) {
	if r, ok := c.recipes[name]; ok {
		return r, nil
	}
	return nil, fmt.Errorf("%w %q (known: %s)", ErrUnknown, name, strings.Join(c.Names(), ", "))
}

// Names lists the recipes, sorted.
func (c *Catalog) Names() []string { return slices.Sorted(maps.Keys(c.recipes)) }
