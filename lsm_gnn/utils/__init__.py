"""Small shared helpers: errors, atomic outputs, machine facts."""
