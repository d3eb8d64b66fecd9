"""What a model is: layer kinds, parameter inventory, weight formats, config readers, catalog."""
