"""Provider knowledge: model profiles, and the active window as each provider's request fragment.

One module per request format (``gemini``, ``openai_chat``,
``openai_responses``, ``anthropic``), pure functions over the model;
``conversation`` holds the rules they share (which result answers which
call, where it goes), ``wire`` the JSON pieces they are assembled from,
``fragments`` what is kept between renderings, ``incremental`` how a
window grown by appends is rendered from what was kept, and ``render``
dispatches by format. ``profiles`` holds the models' profiles.
"""
