package recipe

import "errors"

// ErrRecipe is wrapped by every error about a recipe's form.
var ErrRecipe = errors.New("agent recipe")

// ErrUnknown is wrapped when no recipe has the name asked for.
var ErrUnknown = errors.New("no such agent recipe")

// ErrProvider is wrapped when a recipe cannot use the provider asked for,
// or the provider cannot go through a model gateway.
var ErrProvider = errors.New("provider")
