package notify

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// checkSubject reports why subj cannot be published to, or nil. The
// renderer (route.Sink.RenderSubject) checks its output too; the sink checks
// again because it cannot know where its renderer came from.
func checkSubject(subj string) error {
	if subj == "" {
		return errors.New("subject is empty")
	}
	for i, tok := range strings.Split(subj, ".") {
		switch {
		case tok == "":
			return fmt.Errorf("subject %q: token %d is empty", subj, i+1)
		case tok == "*" || tok == ">":
			return fmt.Errorf("subject %q: token %d is a wildcard", subj, i+1)
		case strings.ContainsAny(tok, " \t\r\n\f\v"):
			return fmt.Errorf("subject %q: token %d contains white space", subj, i+1)
		}
	}
	return nil
}

// streamSubject returns the subject filter of the stream create_stream
// makes for a subject template: the template's leading literal tokens
// followed by '>', such as "energy.alarms.>" for
// "energy.alarms.{{.TenantID}}.{{.StationID}}.{{.Level}}.{{.Transition}}";
// a template without actions is its own filter.
func streamSubject(templateText string) (string, error) {
	if !strings.Contains(templateText, "{{") && checkSubject(templateText) == nil {
		return templateText, nil
	}
	var lit []string
	for _, tok := range strings.Split(templateText, ".") {
		if strings.Contains(tok, "{{") || tok == "" || tok == "*" || tok == ">" {
			break
		}
		lit = append(lit, tok)
	}
	if len(lit) == 0 {
		return "", fmt.Errorf("subject template %s starts with no literal token, so the stream to create would capture every subject", strconv.Quote(templateText))
	}
	if checkSubject(strings.Join(lit, ".")) != nil {
		return "", fmt.Errorf("subject template %s: its literal prefix is not a valid subject", strconv.Quote(templateText))
	}
	return strings.Join(lit, ".") + ".>", nil
}
