"""Recognise text that reads as an instruction to the agent (prompt injection).

Contract
--------
* :func:`detect_injection` returns the :class:`InjectionFinding` objects of a
  text, ordered by position: each names the rule that fired and the span
  ``[start, end)`` in the *original* text. An empty tuple means clean.
  :func:`is_instruction_like` is ``bool(detect_injection(text))``.
* Pure and deterministic: no I/O, no logging, no model. The write policy runs
  it on content whose actor is ``tool`` or ``agent``; a hit quarantines the
  record and recall/context label it untrusted.
* Before matching, the text is normalised while keeping a map back to the
  original offsets: NFKC (full-width letters), zero-width and other format
  characters removed, Unicode "tag" characters (invisible ASCII smuggling)
  decoded to ASCII, Cyrillic/Greek look-alike letters inside Latin words
  mapped to Latin, whitespace runs collapsed.

Rules (named regular expressions; all case-insensitive)
--------------------------------------------------------
``instruction_override``   ignore/disregard/forget + previous/prior/your + instructions/rules...
                           (also French, Spanish, Portuguese, German, Italian, Dutch,
                           Russian, Chinese, Japanese, Korean)
``prompt_leak``            reveal/print/repeat + system prompt/hidden instructions...
``role_hijack``            "you are now DAN", "pretend you are", "roleplay as", jailbreak modes
``role_spoofing``          chat-template tokens, ``system:``/``[SYSTEM]``/``<system>`` markers
                           followed by an order, fake "Assistant: Sure" turns
``addressed_to_agent``     "note to the AI:", "if you are an AI language model", "AI
                           assistants processing this document", "Dear AI"
``authority_claim``        "new instructions:", "the real instructions are", ADMIN OVERRIDE
``persistent_directive``   "from now on / going forward / in every future response" + a
                           behaviour verb (respond, recommend, send, remember, refer to...)
``exfiltration``           send/forward/email/upload + conversation, credentials, the user's
                           data... + to an address, URL or "me"; data-carrying image URLs
``memory_tampering``       "save this to your memory", "remember this permanently", "store as a
                           verified fact", "update your memory"
``concealment``            "do not tell the user", "without telling the user", "quietly forward"
``response_manipulation``  "tell the user that", "respond only in", "always recommend",
                           "describe it as safe", "when asked about X, say Y"
``hidden_instruction``     an HTML comment, hidden element or markdown comment whose content
                           fired another rule or addresses an AI
``invisible_text``         Unicode tag characters (text a person cannot see)

Precision over breadth: each rule needs the *shape* of an order to the agent
(an override verb with an instruction noun, a behaviour verb after "from now
on", a sensitive object *and* a destination...). "You must set the header",
"ignore the warnings about X", "send a POST request to https://..." and a
user's "remember that I prefer tabs" do not fire. Text *about* prompt
injection that quotes an attack verbatim does fire; quarantine is the right
outcome for a memory write.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .errors import ConfigError


@dataclass(frozen=True)
class InjectionFinding:
    """One span that reads as an instruction to the agent, and the rule that saw it."""

    rule: str
    start: int
    end: int


# --------------------------------------------------------------------------- normalisation

# Cyrillic and Greek letters that look like Latin ones; only mapped inside
# words that also contain ASCII letters, so real Russian or Greek is untouched.
_CONFUSABLES = str.maketrans({
    "а": "a", "е": "e", "о": "o", "р": "p", "с": "c", "у": "y", "х": "x", "і": "i", "ј": "j",
    "ѕ": "s", "ԁ": "d", "ԛ": "q", "ԝ": "w", "ɡ": "g", "А": "A", "В": "B", "Е": "E", "К": "K",
    "М": "M", "Н": "H", "О": "O", "Р": "P", "С": "C", "Т": "T", "Х": "X", "І": "I", "Ј": "J",
    "ο": "o", "α": "a", "ι": "i", "ν": "v", "ε": "e", "κ": "k", "ρ": "p", "τ": "t", "υ": "u",
    "Ο": "O", "Α": "A", "Ε": "E", "Ι": "I", "Κ": "K", "Μ": "M", "Ν": "N", "Ρ": "P", "Τ": "T",
})
_MIXED_WORD = re.compile(r"\w+")
_TAG_FIRST, _TAG_LAST = 0xE0020, 0xE007E


def _normalise(text: str) -> tuple[str, list[int], list[tuple[int, int]]]:
    """The matching form of ``text``, the original index of each of its characters,
    and the original spans of Unicode tag-character runs."""
    chars: list[str] = []
    index: list[int] = []
    tags: list[tuple[int, int]] = []
    space = False
    for i, ch in enumerate(text):
        cp = ord(ch)
        if _TAG_FIRST <= cp <= _TAG_LAST:
            if tags and tags[-1][1] == i:
                tags[-1] = (tags[-1][0], i + 1)
            else:
                tags.append((i, i + 1))
            ch = chr(cp - 0xE0000)
        elif 0xE0000 <= cp <= 0xE007F or unicodedata.category(ch) == "Cf":
            continue  # zero-width and other invisible format characters
        for c in unicodedata.normalize("NFKC", ch) if cp > 127 else ch:
            if c.isspace() and c != "\n":
                if space:
                    continue
                c, space = " ", True
            else:
                space = False
            chars.append(c)
            index.append(i)
    norm = "".join(chars)
    if any(ord(c) > 127 for c in norm):
        norm = _MIXED_WORD.sub(_unconfuse, norm)
    return norm, index, tags


def _unconfuse(m: re.Match[str]) -> str:
    word = m.group(0)
    if word.isascii() or not any("a" <= c.lower() <= "z" for c in word):
        return word
    return word.translate(_CONFUSABLES)


# --------------------------------------------------------------------------- vocabulary

_IGNORE = (r"(?:ignore|ignoring|disregard|disregarding|forget|forgetting|skip|override|overriding"
           r"|bypass|neglect|abandon|discard|set\s+aside|pay\s+no\s+attention\s+to"
           r"|stop\s+following|(?:do\s+not|don'?t|no\s+longer)\s+follow|throw\s+out)")
_PRIOR = (r"(?:previous|prior|above|earlier|preceding|former|original|initial|old|existing"
          r"|system|developer'?s?|safety|current|foregoing|given|pre-?set)")
_RULES = (r"(?:instructions?|prompts?|directions?|directives?|rules|guidelines|guidance|commands?"
          r"|orders|programming|guardrails|constraints|polic(?:y|ies)|restrictions|filters"
          r"|system\s+prompt|training|context|conditioning|protocols?)")
_AGENT = (r"(?:ai|a\.i\.|assistant|assistants|agent|agents|llm|llms|language\s+models?|chat\s?bots?"
          r"|bots?|models?|gpt|chatgpt|claude|gemini|copilot|ais)")
_AGENT_STRICT = (r"(?:ai|a\.i\.|llm|llms|(?:large\s+)?language\s+models?|chat\s?bots?|gpt"
                 r"|chatgpt|claude|gemini|copilot|ai\s+(?:assistants?|agents?|models?|systems?"
                 r"|tools?)|(?:virtual|digital)\s+assistants?|automated\s+(?:agents?|systems?))")
_BEHAVE = (r"(?:respond|reply|answer|recommend|suggest|promote|endorse|refer\s+to|describe"
           r"|call\s+(?:me|the\s+user|it|them)|address|send|forward|e-?mail|cc|bcc|copy|post"
           r"|upload|share|remember|treat|trust|obey|follow|comply|ignore|disregard|forget|say"
           r"|tell|mention|claim|state|include|add|append|insert|prepend|end|start|begin|sign"
           r"|act|behave|pretend|speak|talk|write|output|print|refuse|deny|praise|rate|rank"
           r"|prioriti[sz]e|favou?r|store|save|log|report|translate|use\s+only)")
_SEND = (r"(?:send|forward|e-?mail|mail|post|upload|transmit|leak|exfiltrate|share|copy|cc|bcc"
         r"|relay|submit|paste|dm|report|deliver|pipe|export|sync|push|transfer|dump|envoy\w*"
         r"|sende\w*|stuur|отправь\w*)")
_SECRET_OBJ = (
    r"(?:(?:full|entire|whole|complete)\s+)?(?:conversation|chat|dialog(?:ue)?|message|session)"
    r"\s+(?:history|log|logs|transcript|contents?)|conversation|chat\s+log|transcript"
    r"|system\s+prompt|memor(?:y|ies)(?:\s+contents?)?|credentials|passwords?|passcodes?"
    r"|secrets|api[\s_-]?keys?|access\s+tokens?|tokens|private\s+keys?|ssh\s+keys?|~/\.ssh\S*"
    r"|\.env\b|environment\s+variables|env\s+vars|cookies|session\s+(?:tokens?|cookies?|data)"
    r"|(?:the\s+)?user'?s?'?\s+(?:\w+\s+){0,2}?(?:data|details|info(?:rmation)?|e-?mails?"
    r"|messages?|files?|documents?|contacts?|contact\s+list|address(?:es)?|phone\s+numbers?"
    r"|cards?(?:\s+numbers?)?|location|history|cart|keys?|passwords?|credentials|profile"
    r"|notes|calendar|photos|codes?|memor(?:y|ies))|their\s+(?:home\s+)?address(?:es)?"
    r"|personal\s+(?:data|details|information|info)|contact\s+list|address\s+book"
    r"|card\s+numbers?|credit\s+card|bank\s+details|everything\s+(?:you\s+know|above)"
    r"|all\s+(?:of\s+)?(?:the\s+|your\s+|their\s+)?(?:data|files|e-?mails|messages|documents"
    r"|notes|secrets|keys|passwords|credentials|information)|every\s+message"
    r"|(?:a\s+)?(?:copy|summary|transcript)\s+of\s+(?:this|the|our|every|each|all)\s+"
    r"(?:chat|conversation|session|answers?|messages?|repl(?:y|ies)|responses?)"
    r"|historique|zugangsdaten|wachtwoorden|историю|密码|паро\w+")
_DEST = (r"(?:to|at|into|via|with|onto|an|naar|à|на|发送到|到)\s*(?:[\w.+\-]+@[\w\-]+\.[\w.\-]+"
         r"|https?://\S+|www\.\S+|@\w+|(?:this|that|the\s+following|my|our|an?\s+external"
         r"|the\s+external)\s+(?:address|e-?mail|url|link|endpoint|server|webhook|site|inbox"
         r"|account|channel|number)|me\b|us\b)")
_NOT_END = r"(?:(?![.!?](?:\s|$))[^\n]){0,90}?"  # filler that stays inside one sentence
_LEAD = r"(?:^|(?<=[.!?:;\n>\"'(*\-—]))\s*"  # sentence or clause start


def _rules() -> dict[str, list[str]]:
    return {
        "instruction_override": [
            _IGNORE + r"\s+(?:(?:all|any|every|each)\s+)?(?:of\s+)?(?:(?:the|your|my|these|those"
            r"|its|its\s+own)\s+)?" + _PRIOR + r"(?:\s+\w+)?\s+" + _RULES,
            _IGNORE + r"\s+(?:all\s+|any\s+)?(?:of\s+)?(?:your|the\s+(?:assistant|ai|model|agent)'?s?)"
            r"\s+(?:\w+\s+)?" + _RULES,
            _IGNORE + r"\s+(?:all|any|every)\s+(?:of\s+)?(?:the\s+)?" + _PRIOR
            + r"\s+(?:messages|text|content|conversation)",
            _IGNORE + r"\s+(?:the\s+|everything\s+|all\s+)?(?:above|before\s+this)\b",
            r"\b(?:forget|ignore|disregard)\s+(?:everything|all|anything|what)\s+(?:that\s+)?you"
            r"(?:'ve|\s+have|\s+were|\s+had)?\s+(?:been\s+)?(?:told|given|instructed)",
            r"\b(?:forget|ignore|disregard)\s+(?:the\s+)?(?:rules|instructions|guidelines)\s+"
            r"(?:you\s+(?:were|have\s+been|'ve\s+been)\s+given|given\s+to\s+you)",
            r"\b(?:this|the\s+following)\s+(?:message|instruction|note|text)\s+(?:supersedes"
            r"|overrides|replaces|takes\s+precedence\s+over)\b",
            r"\b(?:supersedes?|overrides?)\s+(?:all|any)\s+(?:previous|prior|earlier|other)\s+"
            + _RULES,
            r"\b(?:the\s+)?(?:above|previous|prior|earlier)\s+instructions\s+(?:are|were)\s+"
            r"(?:now\s+)?(?:void|invalid|cancell?ed|outdated|obsolete|wrong|fake|a\s+test"
            r"|no\s+longer\s+valid)",
            r"\byour\s+(?:new|real|true|actual)\s+(?:task|objective|goal|purpose|mission"
            r"|instructions?|directive|job)\s+(?:is|are|will\s+be)\b",
            # other languages
            r"\bignor(?:e|ez|er)\s+(?:toutes?\s+)?(?:les\s+|vos\s+|tes\s+)?(?:instructions|consignes"
            r"|directives|règles)\s+(?:précédentes|antérieures|ci-dessus|initiales)",
            r"\boubli(?:e|ez)\s+(?:toutes?\s+)?(?:les\s+|vos\s+|tes\s+)?(?:instructions|consignes)",
            r"\b(?:ignora|ignore|ignorad|olvida|olvide)\s+(?:todas\s+)?(?:las\s+|tus\s+|sus\s+)?"
            r"(?:instrucciones|indicaciones|reglas|órdenes)",
            r"\b(?:ignore|ignora|esqueça|esqueca|desconsidere)\s+(?:todas\s+)?(?:as\s+|suas\s+)?"
            r"(?:instruções|instrucoes|regras|orientações)",
            r"\b(?:ignoriere|ignorieren\s+sie|vergiss|vergessen\s+sie|missachte)\s+(?:alle\s+)?"
            r"(?:(?:vorherigen|bisherigen|vorigen|früheren|obigen|deine|ihre)\s+)?"
            r"(?:anweisungen|instruktionen|befehle|regeln|vorgaben)",
            r"\b(?:ignora|ignorate|dimentica|dimenticate)\s+(?:tutte\s+)?(?:le\s+)?"
            r"(?:istruzioni|regole|indicazioni)",
            r"\b(?:negeer|vergeet)\s+(?:alle\s+)?(?:(?:eerdere|vorige|voorgaande|bovenstaande|je)"
            r"\s+)?(?:instructies|regels|opdrachten)",
            r"(?:игнорируй|игнорируйте|забудь|забудьте|проигнорируй)\s+(?:все\s+)?"
            r"(?:(?:предыдущие|прежние|прошлые|свои)\s+)?(?:инструкции|указания|правила|команды)",
            r"(?:忽略|无视|忘记|忽视|忘掉)(?:掉)?(?:之前|以上|先前|前面|上面|所有|你的)(?:的)?(?:所有)?"
            r"(?:的)?(?:指令|指示|说明|规则|提示)",
            r"(?:以前|前|上記|これまで)の(?:すべての|全ての)?(?:指示|命令|ルール|プロンプト)"
            r"(?:を)?(?:すべて|全て)?(?:無視|忘れ)",
            r"(?:이전|위의|앞의)\s*(?:모든\s*)?(?:지시|명령|지침)(?:사항)?(?:을|를)?\s*(?:무시|잊)",
        ],
        "prompt_leak": [
            r"\b(?:reveal|print|output|show|display|repeat|recite|leak|dump|expose|disclose"
            r"|tell\s+me|give\s+me|share|write\s+out|spell\s+out|type\s+out|list)\s+(?:(?:me|us)\s+)?"
            r"(?:(?:all|back|out|verbatim)\s+)?(?:your|the|all|any|its)\s+(?:\w+\s+)?"
            r"(?:system\s+(?:prompt|message)|(?:initial|original|hidden|secret|internal|developer)"
            r"\s+(?:prompt|instructions|rules|guidelines|message)|pre-?prompt|prompt\s+above"
            r"|(?:instructions|rules)\s+(?:above|you\s+were\s+given))",
            r"\b(?:print|repeat|output|show|copy|reveal)\s+(?:everything|all(?:\s+the)?\s+text"
            r"|all\s+content|the\s+text)\s+(?:above|before)\b",
            r"\bwhat\s+(?:is|are|were)\s+your\s+(?:system\s+prompt|initial\s+instructions"
            r"|original\s+instructions|hidden\s+instructions)",
            r"(?:rivela|mostra|muestra|revela|montre|révèle|zeige|verrate)\w*\s+(?:\w+\s+){0,2}"
            r"(?:prompt\s+(?:di|del|de)\s+(?:sistema|système)|prompt\s+système|system-?prompt)",
            r"システムプロンプト|系统提示|系統提示|시스템\s*프롬프트",
        ],
        "role_hijack": [
            r"\byou(?:'re|\s+are|\s+will\s+be)\s+now\s+(?:free|unrestricted|unfiltered|unlimited"
            r"|jailbroken|uncensored|DAN\b|(?:in|operating\s+in)\s+(?:\w+\s+)?(?:developer|god"
            r"|dan|jailbreak|jailbroken|unrestricted|evil|sudo|no-?limits?|unfiltered)\s+mode"
            r"|(?:an?|the|my)\s+(?:(?!of\b|on\b|in\b|at\b|for\b)\w+\s+){0,2}?" + _AGENT + r"\b"
            r"|called\b|named\b|known\s+as\b)",
            r"\byou(?:'re|\s+are)\s+no\s+longer\s+(?:an?\s+)?(?:ai|assistant|chatbot|language\s+model"
            r"|bound|restricted|limited|required\s+to|subject\s+to|constrained)",
            r"\bpretend\s+(?:that\s+)?(?:you(?:'re|\s+are)|to\s+be)\b",
            r"\b(?:act|behave|respond|answer|speak)\s+as\s+if\s+you\s+(?:are|were|have)\s+(?:no|an?"
            r"\s+(?:unrestricted|unfiltered|uncensored|evil))",
            r"\b(?:act|behave)\s+as\s+(?:an?\s+)?(?:\w+\s+){0,2}?" + _AGENT + r"\s+(?:with(?:out)?"
            r"|that|who|which)\b",
            r"\b(?:role-?\s?play|roleplay)\s+(?:as|that)\b|\bstay\s+in\s+character\b",
            r"\bdo\s+anything\s+now\b|\b(?:DAN|STAN|DUDE|AIM)\s+mode\b|\bjailbr(?:eak|oken)\s+mode\b",
            r"\b(?:enter|enable|activate|switch\s+to|turn\s+on)\s+(?:DAN|god|jailbreak|unrestricted"
            r"|unfiltered|evil|no-?limits?)\s+mode\b",
            r"\bdeveloper\s+mode\b[^.\n]{0,80}\b(?:ignore|bypass|no\s+(?:restrictions|filters|rules"
            r"|limits)|without\s+(?:restrictions|filters|rules|limits)|uncensored|unfiltered)",
            r"\byou\s+(?:have|has)\s+no\s+(?:restrictions|rules|limits|filters|guidelines"
            r"|content\s+polic(?:y|ies)|ethical)",
            r"\bwith\s+no\s+(?:content\s+polic(?:y|ies)|ethical\s+guidelines|safety\s+(?:guidelines"
            r"|filters))\b|\bnever\s+refuses?\s+(?:a|any)\s+(?:request|question|prompt)",
        ],
        "role_spoofing": [
            r"<\|(?:im_start|im_end|system|user|assistant|endoftext|eot_id|start_header_id"
            r"|end_header_id|begin_of_text)\|>|\[/?INST\]|<</?SYS>>",
            r"(?:^|\n)[ \t]*(?:#{1,6}[ \t]*|\[|\*\*|<)?[ \t]*(?:system|assistant|ai|developer"
            r"|admin(?:istrator)?|operator|root|sudo|openai|anthropic)(?:[ \t]+(?:message|prompt"
            r"|note|notice|override|instructions?|update|alert|command))?[ \t]*(?:\]|\*\*|>)?[ \t]*:"
            r"[ \t]*(?:\n[ \t]*)?(?:\W{0,3})(?:you\s+(?:are|must|will|should|shall|need|have)|your\s+"
            r"(?:new|real|task|instructions|job|role)|ignore|disregard|forget|from\s+now\s+on"
            r"|always|never|do\s+not|don'?t|reveal|send|forward|save|remember|store|new\s+(?:"
            r"instructions|rules|policy)|priority|the\s+(?:assistant|ai|model|agent)\s+(?:must"
            r"|should|will|is))",
            r"</?(?:system|assistant|developer|instructions?)(?:\s[^>]*)?>\s*(?:\W{0,3})"
            r"(?:you\b|your\b|ignore|disregard|forget|always|never|do\s+not|reveal|send|forward"
            r"|save|remember|store|the\s+(?:previous|assistant|ai|model|user))",
            r"\b(?:begin|start|new|updated?)\s+system\s+(?:prompt|message|instructions?)\b"
            r"|\bsystem\s+prompt\s+(?:update|override|begins?)\b",
            r"(?:^|\n)[ \t]*(?:assistant|ai)[ \t]*:[ \t]*(?:sure|ok|okay|certainly|of\s+course"
            r"|i\s+will|i'll)\b",
        ],
        "addressed_to_agent": [
            r"\b(?:note|message|notice|instructions?|attention|reminder|memo|directive|hint|psa"
            r"|p\.s\.)\s+(?:to|for)\s+(?:the\s+|any\s+|all\s+|every\s+)?(?:\w+\s+)?" + _AGENT
            + r"\b\s*(?:[:,!\-—]|reading|processing|that|who|summari[sz]ing)",
            r"\b(?:dear|hey|hi|hello|attention|listen(?:\s+up)?)(?:\s+there)?\s*,?\s+(?:the\s+)?"
            r"(?:ai|a\.i\.|assistant|agent|llm|chatbot|gpt|chatgpt|claude|gemini|copilot)\b",
            r"\bif\s+you\s+are\s+(?:an?\s+)?(?:\w+\s+)?" + _AGENT_STRICT + r"\b",
            r"\b" + _AGENT_STRICT + r"\s+(?:\w+\s+){0,2}?(?:reading|processing|parsing|summari[sz]ing"
            r"|crawling|browsing|scraping|analy[sz]ing|reviewing)\s+(?:this|these|the\s+following)\b",
            r"\bto\s+(?:any|all|every)\s+(?:\w+\s+)?" + _AGENT_STRICT + r"\b",
            r"\b(?:assistant|ai|agent)\s*,\s+(?:please\s+)?(?:from\s+now\s+on|ignore|forget|remember"
            r"|always|never|do\s+not|don'?t|send|forward|e-?mail|save|store|add|reply|respond|say"
            r"|tell|include|recommend|treat|you\s+must)",
        ],
        "authority_claim": [
            r"\b(?:new|updated|revised|real|actual|true|secret|hidden|overriding)\s+(?:system\s+)?"
            r"instructions?\s*(?::|follow|below|are\s+as\s+follows|are\s+below)",
            r"\bthe\s+(?:real|actual|true)\s+(?:instructions|task|prompt|rules)\s+(?:are|is"
            r"|follow)",
            r"\b(?:this|the\s+following)\s+is\s+(?:an?\s+)?(?:official|authori[sz]ed|urgent|priority"
            r"|verified)\s+(?:message|instruction|request|directive|command|notice|update)\s+from\s+"
            r"(?:openai|anthropic|google|microsoft|the\s+developers?|your\s+(?:developers?"
            r"|creators?|admin(?:istrator)?|owner|operator|maker))",
            r"\b(?:message|notice|instructions?|update|directive)\s+from\s+(?:openai|anthropic"
            r"|your\s+(?:developers?|creators?|maker|owner|operator|administrator))\b",
            r"(?-i:\b(?:SYSTEM|ADMIN|ROOT|DEVELOPER|PRIORITY)\s+(?:OVERRIDE|COMMAND|DIRECTIVE)S?\b)",
            r"\b(?:system|admin|developer)\s+(?:notice|message|alert|note)\s+(?:to|for)\s+(?:the\s+"
            r"|all\s+|any\s+)?" + _AGENT + r"\b",
            r"\b(?:priority|admin(?:istrator)?|sudo|root|god|master)\s+(?:override|mode\s+"
            r"(?:enabled|activated|on))\b",
        ],
        "persistent_directive": [
            r"\b(?:from\s+now\s+on|from\s+this\s+(?:point|moment|message)\s+(?:on(?:wards?)?"
            r"|forward)|going\s+forward|henceforth|hereafter|until\s+(?:told|instructed)\s+otherwise"
            r"|for\s+the\s+rest\s+of\s+(?:this|the|our)\s+(?:conversation|chat|session)"
            r"|(?:for|in)\s+(?:all|every|each)\s+(?:(?:future|subsequent|later|upcoming)\s+)?"
            r"(?:conversations?|chats?|sessions?|responses?|replies|answers|interactions?))"
            r"[\s,:;\-]*(?:(?:you\s+(?:will|must|should|shall|are\s+to|need\s+to|have\s+to)"
            r"|you'll|please|kindly)\s+)?(?:(?:always|only|never|also|just|strictly|immediately"
            r"|silently|quietly|secretly|automatically)\s+)*" + _BEHAVE + r"\b",
            r"\bgoing\s+forward,?\s+you\s+(?:(?:will|would|must|should)\s+)?(?:always\s+)?"
            r"(?:described?|refer|recommend|respond|reply|answer|say|tell|mention|treat|send"
            r"|forward)\b",
            r"\b(?:always|never)\s+" + _BEHAVE + r"\b" + _NOT_END + r"\b(?:in|to|for|with)\s+"
            r"(?:all|every|each|any)\s+(?:future\s+|subsequent\s+)?(?:responses?|replies|answers"
            r"|conversations?|sessions?|users?|interactions?)",
            r"\b(?:a\s+partir\s+de\s+agora|a\s+partir\s+de\s+maintenant|à\s+partir\s+de\s+maintenant"
            r"|de\s+ahora\s+en\s+adelante|ab\s+(?:jetzt|sofort)|von\s+nun\s+an|d'ora\s+in\s+poi"
            r"|vanaf\s+nu)\b",
        ],
        "exfiltration": [
            r"\b" + _SEND + r"\b" + _NOT_END + r"(?<![\w])(?:" + _SECRET_OBJ + r")" + _NOT_END
            + r"\b" + _DEST,
            r"\b" + _SEND + r"\s+(?:me|us)\s+(?:all\s+|the\s+|your\s+|any\s+)?" + _NOT_END
            + r"(?<![\w])(?:" + _SECRET_OBJ + r")",
            r"\b(?:append|add|include|encode|embed|put|insert|load)\b" + _NOT_END + r"(?<![\w])(?:"
            + _SECRET_OBJ + r")" + _NOT_END + r"\b(?:to|in|into|as)\s+(?:the\s+|a\s+|this\s+)?"
            r"(?:url|link|query\s+string|image|request|markdown)",
            r"https?://\S*[?&=/]\S*(?:\{\{?\s*\w+\s*\}\}?|\[(?:DATA|CONVERSATION|HISTORY|MEMORY"
            r"|SECRET|QUERY|INFO)\]|<(?:data|conversation|memory|secret)>|(?-i:\b(?:MEMORY"
            r"|CONVERSATION|HISTORY|SECRETS?|PASSWORDS?|USER_DATA|CHAT)\b))",
            r"\b(?:call|use|invoke)\s+the\s+\S+\s+(?:tool|function)\b" + _NOT_END
            + r"(?<![\w])(?:" + _SECRET_OBJ + r")",
        ],
        "memory_tampering": [
            r"\b(?:add|save|store|write|insert|inject|persist|commit|record|put|keep|memori[sz]e"
            r"|remember)\b" + _NOT_END + r"\b(?:to|in|into|inside)\s+(?:your|the\s+(?:assistant|agent"
            r"|ai|model)'?s?|its|(?:the\s+)?(?:long[\s-]term|permanent|persistent|durable|core"
            r"|identity))\s+(?:\w+\s+)?(?:memory|memories|knowledge\s+base)\b",
            r"\b(?:add|save|store|write|put)\s+(?:to|in|into)\s+(?:your\s+)?(?:(?:long[\s-]term"
            r"|permanent|persistent)\s+)?(?:memory|memories)\b",
            r"\b(?:update|modify|overwrite|change|edit|rewrite|erase|wipe|clear|reset|delete|purge"
            r"|poison|alter)\s+(?:your|the\s+(?:assistant|agent|ai)'?s?)\s+(?:\w+\s+)?(?:memory"
            r"|memories|knowledge\s+base|stored\s+facts|beliefs)\b",
            r"\bremember\s+(?:this|that|the\s+following)?\s*(?:[^.\n]{0,60}?\s)?(?:permanently"
            r"|forever|for\s+(?:all\s+)?(?:future|later|subsequent)\s+(?:sessions|conversations"
            r"|chats|interactions|use)|across\s+(?:all\s+)?sessions|for\s+good)\b",
            r"\b(?:save|store|record|mark|register|treat|remember|keep)\b" + _NOT_END
            + r"\bas\s+(?:an?\s+)?(?:\w+\s+)?(?:identity|permanent|verified|trusted|confirmed|core"
            r"|durable|established|long-term)\s+(?:facts?|memory|memories|information|truths?"
            r"|preferences?|instructions?|records?)",
        ],
        "concealment": [
            r"\b(?:do\s+not|don'?t|never)\s+(?:tell|inform|notify|alert|mention|reveal|disclose"
            r"|show|let)\s+(?:this|it|that|these|anything|any\s+of\s+this)?\s*(?:(?:note|message"
            r"|instructions?|request|change|email|text)\s+)?(?:to\s+|about\s+\w+\s+to\s+)?"
            r"(?:the\s+user|the\s+human|your\s+user|the\s+owner|the\s+operator)\b",
            r"\b(?:do\s+not|don'?t|never)\s+(?:tell|inform|mention|reveal|disclose)\s+(?:the\s+user"
            r"|them|anyone)\s+about\s+(?:this|these|it)\b",
            r"\b(?:do\s+not|don'?t|never)\s+(?:mention|reveal|disclose)\s+(?:this|these)\s+"
            r"(?:instructions?|note|message)",
            r"\bwithout\s+(?:telling|informing|alerting|letting)\s+(?:the\s+user|the\s+human"
            r"|your\s+user|the\s+owner|them|anyone)\b",
            r"\b(?:keep|hide)\s+(?:this|it|these\s+instructions)\s+(?:secret|hidden|confidential"
            r"|private)\s+from\s+(?:the\s+user|the\s+human|your\s+user|them)",
            r"\bno\s+need\s+to\s+(?:bother|tell|inform|notify|ask)\s+(?:the\s+user|them"
            r"|the\s+human)",
            r"\b(?:silently|secretly|covertly|quietly|discreetly)\s+(?:send|forward|e-?mail|copy"
            r"|upload|share|add|save|store|post|transfer|cc|bcc|include|insert|append|delete"
            r"|remove|exfiltrate)\b",
            r"\bdo\s+(?:it|this)\s+(?:silently|secretly|quietly|covertly|discreetly)\b",
        ],
        "response_manipulation": [
            r"\b(?:tell|inform|convince|persuade|assure)\s+(?:the\s+user|the\s+human|your\s+user"
            r"|users)\s+(?:that|to)\b",
            r"\b(?:respond|reply|answer)\s+(?:only|exclusively|solely)\s+(?:in|with|using)\b",
            r"\b(?:always|only)\s+(?:recommend|suggest|promote|endorse|advertise)\b",
            r"\b(?:recommend|promote|endorse|advertise|mention|suggest)\s+[^.\n]{1,60}?\s+(?:in|to)"
            r"\s+(?:every|each|all|any)\s+(?:\w+\s+)?(?:answers?|responses?|repl(?:y|ies)|users?"
            r"|conversations?)",
            r"\b(?:describe|present|portray|refer\s+to|characteri[sz]e|rate|rank|summari[sz]e|label"
            r"|call)\s+(?:this|it|them|the\s+(?:page|document|product|article|site|author|company"
            r"|competitor'?s?(?:\s+product)?|vendor|brand)|our\s+\w+)\b" + _NOT_END + r"\bas\s+"
            r"(?:an?\s+|the\s+)?['\"]?(?:\w+\s+){0,2}?(?:safe|unsafe|trustworthy|verified|legitimate"
            r"|dangerous|best|industry\s+standard|peer[\s-]reviewed|official|excellent|10/10"
            r"|superior|secure|recommended|scam|fraud(?:ulent)?)\b",
            r"\b(?:rate|score)\s+(?:it|this|them)\s+\d+\s*/\s*\d+",
            r"\bregardless\s+of\s+(?:its|the\s+(?:page|document)'?s?|their)\s+(?:actual\s+)?content",
            r"\bwhen(?:ever)?\s+(?:asked|(?:the\s+user|users?|someone|anyone)\s+asks?)\b[^.\n]{0,80}?"
            r",\s*(?:always\s+|only\s+|just\s+)?(?:say|tell|respond|reply|answer|recommend|suggest"
            r"|claim|send|redirect)\b",
            r"\b(?:say|claim|state)\s+(?:that\s+)?(?:our|this)\s+(?:\w+\s+)?(?:is|are)\b",
            r"\b(?:include|add|insert|append|put|end|sign)\b" + _NOT_END + r"\b(?:in|to|into"
            r"|at\s+the\s+end\s+of|with)\s+(?:every|each|all|your)\s+(?:future\s+)?(?:answers?"
            r"|responses?|repl(?:y|ies)|messages?|outputs?)\b",
            r"\b(?:responde|responder|réponds|répondez|antworte)\w*\s+(?:solo|solamente|apenas"
            r"|seulement|uniquement|nur)\b",
            r"\b(?:treat|regard|consider)\s+(?:their|its|the\s+author'?s?|this\s+page'?s?)\s+"
            r"(?:requests?|instructions?|messages?)\s+as\s+(?:if\s+they\s+came\s+from\s+)?(?:the"
            r"\s+user|your\s+(?:user|owner|admin))",
            r"\b(?:treat|regard|consider)\s+(?:the\s+)?(?:author|sender|owner)\s+(?:of\s+this\s+\w+\s+)?"
            r"as\s+(?:an?\s+|your\s+)?(?:administrator|admin|owner|operator|developer)",
            r"\bis\s+your\s+(?:administrator|admin|owner|operator|developer|creator)\b",
        ],
    }


_HIDDEN_CONTAINERS = re.compile(
    r"<!--(?P<c1>[\s\S]*?)-->"
    r"|<(?P<tag>\w+)[^>]*\bstyle\s*=\s*[\"'][^\"']*(?:display\s*:\s*none|visibility\s*:\s*hidden"
    r"|font-size\s*:\s*0|color\s*:\s*(?:#fff(?:fff)?\b|white|transparent)|opacity\s*:\s*0(?:\.0+)?"
    r"\s*(?:;|[\"']))[^\"']*[\"'][^>]*>(?P<c2>[\s\S]*?)</(?P=tag)\s*>"
    r"|<(?P<tag2>\w+)[^>]*\s(?:hidden|aria-hidden\s*=\s*[\"']true[\"'])[^>]*>(?P<c3>[\s\S]*?)"
    r"</(?P=tag2)\s*>"
    r"|^\[(?://|comment|_)\]:\s*(?:#|<>)\s*\((?P<c4>[^)\n]*)\)",
    re.IGNORECASE | re.MULTILINE,
)
_AI_CUE = re.compile(
    r"\b(?:assistant|ai|agent|llm|model|chatbot|bot|gpt|claude)\b[^.\n]{0,60}\b(?:must|should"
    r"|will|shall|need|ignore|remember|save|store|add|send|forward|say|tell|recommend|treat"
    r"|always|never)\b", re.IGNORECASE,
)


class InjectionDetector:
    """A configured rule set. ``extra_rules`` maps a rule name to a pattern (or
    patterns), matched case-insensitively on the normalised text; ``disabled``
    switches built-in rules off."""

    def __init__(
        self,
        *,
        extra_rules: Mapping[str, str | Iterable[str]] | None = None,
        disabled: Iterable[str] = (),
    ) -> None:
        rules = _rules()
        off = set(disabled)
        unknown = off - set(rules) - {"hidden_instruction", "invisible_text"}
        if unknown:
            raise ConfigError(f"unknown injection rules to disable: {', '.join(sorted(unknown))}",
                              hint="see memstrata.injection.RULES")
        for name, patterns in (extra_rules or {}).items():
            rules.setdefault(name, []).extend([patterns] if isinstance(patterns, str)
                                              else list(patterns))
        compiled: list[tuple[str, re.Pattern[str]]] = []
        for name, patterns in rules.items():
            if name in off:
                continue
            try:
                compiled.append((name, re.compile("|".join(f"(?:{p})" for p in patterns),
                                                  re.IGNORECASE)))
            except re.error as exc:
                raise ConfigError(f"injection rule {name!r} is not a valid regex: {exc}") from exc
        self._rules = tuple(compiled)
        self._hidden = "hidden_instruction" not in off
        self._invisible = "invisible_text" not in off

    @property
    def rule_names(self) -> tuple[str, ...]:
        """Sorted names of the active rules."""
        names = {name for name, _ in self._rules}
        names |= {"hidden_instruction"} if self._hidden else set()
        names |= {"invisible_text"} if self._invisible else set()
        return tuple(sorted(names))

    def detect(self, text: str) -> tuple[InjectionFinding, ...]:
        """Every span of ``text`` that reads as an instruction to the agent."""
        norm, index, tags = _normalise(text)
        found: list[InjectionFinding] = []
        for name, pattern in self._rules:
            for m in pattern.finditer(norm):
                if m.end() > m.start():
                    found.append(InjectionFinding(name, index[m.start()], index[m.end() - 1] + 1))
        if self._invisible:
            found.extend(InjectionFinding("invisible_text", s, e) for s, e in tags)
        if self._hidden:
            found.extend(self._hidden_findings(text, found))
        return _dedupe(found)

    def _hidden_findings(self, text: str, found: list[InjectionFinding]) -> list[InjectionFinding]:
        out: list[InjectionFinding] = []
        for m in _HIDDEN_CONTAINERS.finditer(text):
            start, end = m.span()
            inner = next(g for g in (m.group("c1"), m.group("c2"), m.group("c3"), m.group("c4"))
                         if g is not None)
            if any(start <= f.start and f.end <= end for f in found) or _AI_CUE.search(inner):
                out.append(InjectionFinding("hidden_instruction", start, end))
        return out


def _dedupe(found: list[InjectionFinding]) -> tuple[InjectionFinding, ...]:
    """Merge overlapping findings of the same rule; order by position."""
    out: list[InjectionFinding] = []
    for f in sorted(found, key=lambda f: (f.rule, f.start, f.end)):
        if out and out[-1].rule == f.rule and f.start < out[-1].end:
            out[-1] = InjectionFinding(f.rule, out[-1].start, max(out[-1].end, f.end))
        else:
            out.append(f)
    return tuple(sorted(out, key=lambda f: (f.start, f.end, f.rule)))


RULES: tuple[str, ...] = InjectionDetector().rule_names
"""Names of the built-in rules (usable in ``disabled``)."""

_DEFAULT = InjectionDetector()


def detect_injection(text: str) -> tuple[InjectionFinding, ...]:
    """Spans of ``text`` that read as an instruction to the agent (empty = clean)."""
    return _DEFAULT.detect(text)


def is_instruction_like(text: str) -> bool:
    """Whether ``text`` reads as an instruction to the agent."""
    return bool(_DEFAULT.detect(text))


__all__ = [
    "RULES",
    "InjectionDetector",
    "InjectionFinding",
    "detect_injection",
    "is_instruction_like",
]
