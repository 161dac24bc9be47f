"""Provider knowledge: the active window rendered as each provider's request fragment.

One module per request format (``gemini``, ``openai_chat``,
``openai_responses``, ``anthropic``), pure functions over the model;
``conversation`` holds the rules they share (which result answers which
call, where it goes) and ``render`` dispatches by format.
"""
