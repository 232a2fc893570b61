package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"
)

// The shells' scripts are thin: on <TAB> they run the binary with the words typed so far and
// urfave/cli's --generate-bash-completion flag, and the binary prints the candidates (its
// commands, subcommands, or a command's flags after "-"). So completion always matches the
// binary that answers it. Fish gets urfave/cli's own static script.

const bashCompletion = `# bash completion for {{name}}. Load it with: source <({{name}} completion bash)
_{{fn}}() {
  local cur="${COMP_WORDS[COMP_CWORD]}"
  local -a words=("${COMP_WORDS[@]:1:COMP_CWORD-1}")
  # After a dash the binary lists the flags of the command typed so far.
  if [[ "$cur" == -* ]]; then words+=("$cur"); fi
  local IFS=$'\n'
  COMPREPLY=($(compgen -W "$("${COMP_WORDS[0]}" "${words[@]}" --generate-bash-completion 2>/dev/null)" -- "$cur"))
}
complete -o bashdefault -o default -F _{{fn}} {{name}}
`

const zshCompletion = `#compdef {{name}}
# zsh completion for {{name}}. Load it with: source <({{name}} completion zsh)
_{{fn}}() {
  local cur=${words[CURRENT]}
  local -a args candidates
  args=("${(@)words[2,CURRENT-1]}")
  if [[ $cur == -* ]]; then args+=("$cur"); fi
  candidates=("${(@f)$(${words[1]} "${(@)args}" --generate-bash-completion 2>/dev/null)}")
  if [[ -n ${candidates[1]} ]]; then
    compadd -- "${(@)candidates}"
  else
    _files
  fi
}
compdef _{{fn}} {{name}}
`

func completionCommand() *cli.Command {
	return &cli.Command{
		Name:      "completion",
		Usage:     "print a shell completion script: bash, zsh or fish",
		UsageText: "polyaxon-deploy completion bash|zsh|fish",
		Description: `Prints a script that completes commands, subcommands and flags. Load it in the current shell:
  bash:  source <(polyaxon-deploy completion bash)
  zsh:   source <(polyaxon-deploy completion zsh)
  fish:  polyaxon-deploy completion fish | source
or write it where the shell loads completions (e.g. /etc/bash_completion.d/polyaxon-deploy).`,
		Flags:  []cli.Flag{debugLogFlag()},
		Action: runCompletion,
	}
}

func runCompletion(c *cli.Context) error {
	args, err := positionalArgs(c)
	if err != nil {
		return err
	}
	if len(args) != 1 {
		return usageErrorf("completion takes one shell: bash, zsh or fish")
	}
	name := c.App.Name
	fill := strings.NewReplacer("{{name}}", name, "{{fn}}", strings.NewReplacer("-", "_", ".", "_").Replace(name)+"_complete").Replace
	var script string
	switch args[0] {
	case "bash":
		script = fill(bashCompletion)
	case "zsh":
		script = fill(zshCompletion)
	case "fish":
		script, err = c.App.ToFishCompletion()
		if err != nil {
			return fmt.Errorf("fish completion: %w", err)
		}
	default:
		return usageErrorf("completion: unknown shell %q: bash, zsh or fish", args[0])
	}
	_, err = fmt.Fprint(stdout(c), script)
	return err
}
