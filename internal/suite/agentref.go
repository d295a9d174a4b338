package suite

import "strings"

// recipePrefix starts the command a suite stores for an agent run by
// recipe: no shell command starts so.
const recipePrefix = "@recipe:"

// RecipeRef is the command a suite stores for an agent run by recipe name
// with model (PROVIDER/MODEL): each trial's proctor run gets --agent NAME
// --model MODEL.
func RecipeRef(name, model string) string { return recipePrefix + name + " " + model }

// ParseRecipeRef returns the recipe and model of a RecipeRef, or ok=false
// for a shell command.
func ParseRecipeRef(command string) (name, model string, ok bool) {
	rest, ok := strings.CutPrefix(command, recipePrefix)
	if !ok {
		return "", "", false
	}
	name, model, ok = strings.Cut(rest, " ")
	return name, model, ok && name != "" && model != ""
}

// agentArgs are proctor run's arguments for an agent's stored command.
func agentArgs(command string) []string {
	if name, model, ok := ParseRecipeRef(command); ok {
		return []string{"--agent", name, "--model", model}
	}
	return []string{"--agent", command}
}
