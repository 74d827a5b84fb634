"""Tables, figures and markdown drawn from results that exist; nothing here loads a model or scores a layer."""
