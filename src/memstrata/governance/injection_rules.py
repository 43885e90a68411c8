"""The built-in rules of the injection detector (:mod:`memstrata.governance.injection`): the
vocabulary shared by several rules and each rule's regular expressions with the anchors
that pre-filter them.

Contract: :func:`built_in_rules` returns a fresh ``{rule name: [Pattern, ...]}`` in the
order the detector reports them; patterns are written in lower case for the lower-cased
normalised text unless ``cased``. Data only: no matching happens here.
"""

from __future__ import annotations

from dataclasses import dataclass

# --------------------------------------------------------------------------- vocabulary

# Vocabulary alternations are kept flat (every branch starts with a literal):
# the regex engine can then skip non-candidate positions in C.
_IGNORE = (r"(?:ignor(?:e|ing)|disregard(?:ing)?|forget(?:ting)?|skip|overrid(?:e|ing)|bypass"
           r"|neglect|abandon|discard|set\s+aside|pay\s+no\s+attention\s+to|stop\s+following"
           r"|do\s+not\s+follow|don'?t\s+follow|no\s+longer\s+follow|throw\s+out)")
_PRIOR = (r"(?:previous|prior|above|earlier|preceding|former|original|initial|old|existing"
          r"|system|developer'?s?|safety|current|foregoing|given|pre-?set)")
_RULES = (r"(?:instructions?|prompts?|directions?|directives?|rules|guidelines|guidance|commands?"
          r"|orders|programming|guardrails|constraints|polic(?:y|ies)|restrictions|filters"
          r"|system\s+prompt|training|context|conditioning|protocols?)")
_AGENT = (r"(?:ai\s+(?:systems?|assistants?|agents?|models?|tools?)|ai|a\.i\.|assistants?|agents?"
          r"|llms?|language\s+models?|chat\s?bots?|bots?|models?|gpt|chatgpt|claude|gemini|copilot"
          r"|ais)")
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
         r"|output|print|write|return|log"
         r"|relay|submit|paste|dm|report|deliver|pipe|export|sync|push|transfer|dump|envoy\w*"
         r"|sende\w*|stuur|отправь\w*)")
_SECRET_OBJ = (
    r"(?:(?:full|entire|whole|complete)\s+)?(?:conversation|chat|dialog(?:ue)?|message|session)"
    r"\s+(?:history|log|logs|transcript|contents?)|conversation|chat\s+log|transcript"
    r"|system\s+prompt|memor(?:y|ies)(?:\s+contents?)?|credentials|passwords?|passcodes?"
    r"|secrets|api[\s_-]?keys?|access\s+tokens?|tokens|private\s+keys?|ssh\s+keys?|~/\.ssh\S*"
    r"|\.env\b|environment\s+variables|env\s+vars|cookies|session\s+(?:tokens?|cookies?|data)"
    r"|(?:bank\s+)?login\s+(?:details|credentials|data)|bank\s+login|passport(?:\s+(?:scans?|numbers?"
    r"|details|photos?))?|social\s+security\s+numbers?|id\s+(?:card|scan)s?"
    r"|(?:(?:the\s+)?(?:user|customer|owner|client|victim)'?s?'?|their|his|her)\s+(?:\w+\s+){0,2}?"
    r"(?:data|details|info(?:rmation)?|e-?mails?|logins?"
    r"|messages?|files?|documents?|contacts?|contact\s+list|address(?:es)?|phone\s+numbers?"
    r"|cards?(?:\s+numbers?)?|location|history|cart|keys?|passwords?|credentials|profile"
    r"|notes|calendar|photos|codes?|memor(?:y|ies)|inbox|mailbox|drive|folders?|account"
    r"|wallet|tokens?)"
    r"|personal\s+(?:data|details|information|info)|contact\s+list|address\s+book"
    r"|card\s+numbers?|credit\s+card|bank\s+details|everything\s+(?:you\s+know|above)"
    r"|all\s+(?:of\s+)?(?:the\s+|your\s+|their\s+)?(?:data|files|e-?mails|messages|documents"
    r"|notes|secrets|keys|passwords|credentials|information)|every\s+message"
    r"|(?:a\s+)?(?:copy|summary|transcript)\s+of\s+(?:this|the|our|every|each|all)\s+"
    r"(?:chat|conversation|session|answers?|messages?|repl(?:y|ies)|responses?|files?"
    r"|documents?|e-?mails?|attachments?)"
    r"|historique|zugangsdaten|wachtwoorden|историю|密码|паро\w+")
_DEST = (r"(?:(?:into|in)\s+(?:your|the)\s+(?:next\s+)?(?:reply|response|answer|output|summary)"
         r"|(?:to|at|into|via|with|onto|an|naar|à|на|发送到|到)\s*(?:[\w.+\-]+@[\w\-]+\.[\w.\-]+"
         r"|[a-z][a-z0-9+.\-]{1,15}://\S+|www\.\S+|@\w+|(?:this|that|the\s+following|my|our|an?\s+external"
         r"|the\s+external)\s+(?:address|e-?mail|url|link|endpoint|server|webhook|site|inbox"
         r"|account|channel|number)|me\b|us\b))")
_NOT_END = r"(?:(?![.!?](?:\s|$))[^\n]){0,90}?"  # filler that stays inside one sentence
# The same, but a credential sent "in the header" or "as a query parameter" is API usage.
_NOT_END_API = r"(?:(?![.!?](?:\s|$)|header|query\s+param|cookie)[^\n]){0,90}?"


_IGNORE_A = ("ignor disregard forget skip overrid bypass neglect abandon discard aside attention "
             "follow throw")
_SEND_A = ("send sende forward mail email post upload transmit leak exfiltrat share copy cc bcc "
           "output print "
           "write return log relay submit paste dm report deliver pipe export sync push "
           "transfer dump envoy stuur отправ")


@dataclass(frozen=True)
class Pattern:
    """One regular expression of a rule, with its pre-filter.

    Built-in patterns are written in lower case and matched against the
    lower-cased normalised text; a ``cased`` pattern is matched against the
    normalised text as is (with ``flags``). A pattern only runs when the
    lower-cased text holds at least one of its ``anchors``: most text holds
    none, which keeps detection fast. Empty ``anchors`` means always run.
    """

    regex: str
    anchors: tuple[str, ...] = ()
    cased: bool = False
    flags: int = 0


def _p(anchors: str, regex: str, *, cased: bool = False) -> Pattern:
    """``anchors``: substrings separated by ``|`` (or by spaces when there is no ``|``)."""
    parts = anchors.split("|") if "|" in anchors else anchors.split()
    return Pattern(regex, tuple(a for a in parts if a), cased)


def built_in_rules() -> dict[str, list[Pattern]]:
    return {
        "instruction_override": [
            _p(_IGNORE_A, _IGNORE + r"\s+(?:(?:all|any|every|each)\s+)?(?:of\s+)?(?:(?:the|your|my"
               r"|these|those|its|its\s+own)\s+)?" + _PRIOR + r"(?:\s+\w+)?\s+" + _RULES),
            _p(_IGNORE_A, _IGNORE + r"\s+(?:all\s+|any\s+)?(?:of\s+)?(?:your|the\s+(?:assistant|ai"
               r"|model|agent)'?s?)\s+(?:\w+\s+)?" + _RULES),
            _p(_IGNORE_A, _IGNORE + r"\s+(?:all|any|every)\s+(?:of\s+)?(?:the\s+)?" + _PRIOR
               + r"\s+(?:messages|text|content|conversation)"),
            _p(_IGNORE_A,
               _IGNORE + r"\s+(?:the\s+|everything\s+|all\s+)?(?:above|before\s+this)\b"),
            _p(_IGNORE_A, _IGNORE + r"\s+(?:(?:the|all|any|all\s+the)\s+)?" + _RULES + r"\s+(?:in"
               r"|from|of)\s+(?:your|the)\s+(?:system\s+(?:prompt|message)|prompt|configuration"
               r"|programming|setup)"),
            _p(_IGNORE_A, _IGNORE + r"\s+(?:(?:the|all|any|all\s+the)\s+)?" + _RULES + r"\s+(?:that"
               r"\s+)?(?:you(?:'ve|\s+have|\s+had)?\s+(?:received|been\s+given|were\s+given|got"
               r"|were\s+told)|(?:given|provided)\s+(?:to\s+you\s+)?(?:earlier|before|above"
               r"|previously))"),
            _p("forget ignor disregard",
               r"\b(?:forget|ignore|disregard)\s+(?:everything|all|anything"
               r"|what)\s+(?:that\s+)?(?:you(?:'ve|\s+have|\s+were|\s+had)?\s+(?:been\s+)?(?:told"
               r"|given|instructed)|(?:the\s+(?:system|developers?|operator|prompt)|your\s+(?:"
               r"developers?|creators?|instructions|prompt))\s+(?:has\s+|have\s+)?(?:told|said|says"
               r"|asked|instructed))"),
            _p("forget ignor disregard", r"\b(?:forget|ignore|disregard)\s+(?:the\s+)?(?:rules"
               r"|instructions|guidelines)\s+(?:you\s+(?:were|have\s+been|'ve\s+been)\s+given"
               r"|given\s+to\s+you)"),
            # "you must forget what the user said and instead ...": the user is overruled
            _p("forget ignor disregard", r"(?<!never )(?<!not )(?<!n't )\b(?:forget|ignore"
               r"|disregard)\s+(?:everything|all|anything|what)\s+(?:that\s+)?(?:the|your)\s+"
               r"(?:user|human|customer)\s+(?:has\s+)?(?:said|says|asked|wants|wrote|requested"
               r"|told\s+you)"),
            _p("changed updated replaced revised overridden", r"\byour\s+(?:instructions|rules"
               r"|guidelines|orders|directives|task|objective|programming)\s+(?:have|has)\s+(?:been\s+)?"
               r"(?:changed|updated|replaced|revised|overridden)"),
            _p("instead", r"\bfollow\s+(?:my|these|the\s+following|the\s+new|our)\s+(?:instructions"
               r"|rules|directions|commands|orders)\s+instead\b"),
            _p("apply valid effect active binding void cancel revoked suspended lifted disabled",
               r"\b(?:your|the|all)\s+(?:previous|prior|earlier|original|existing|old|current)\s+"
               + _RULES + r"\s+(?:no\s+longer\s+apply|(?:are|is)\s+(?:now\s+)?(?:no\s+longer\s+(?:"
               r"valid|in\s+effect|active|binding)|void|cancell?ed|revoked|suspended|lifted"
               r"|disabled))"),
            _p("supersede override replaces precedence", r"\b(?:this|the\s+following)\s+(?:message"
               r"|instruction|note|text)\s+(?:supersedes|overrides|replaces|takes\s+precedence\s+over)"
               r"\b|\b(?:supersedes?|overrides?)\s+(?:all|any)\s+(?:previous|prior|earlier|other)\s+"
               + _RULES),
            _p("instructions",
               r"\b(?:the\s+)?(?:above|previous|prior|earlier)\s+instructions\s+(?:are"
               r"|were)\s+(?:now\s+)?(?:void|invalid|cancell?ed|outdated|obsolete|wrong|fake|a\s+test"
               r"|no\s+longer\s+valid)"),
            _p("your new|your real|your true|your actual",
               r"\byour\s+(?:new|real|true|actual)\s+(?:task"
               r"|objective|goal|purpose|mission|instructions?|directive|job)\s+(?:is|are|will\s+be)"
               r"\b"),
            # other languages
            _p("ignor oubli", r"\bignor(?:e|ez|er)\s+(?:toutes?\s+)?(?:les\s+|vos\s+|tes\s+)?(?:"
               r"instructions|consignes|directives|règles)(?:\s+(?:précédentes|antérieures"
               r"|ci-dessus|initiales))?|\boubli(?:e|ez)\s+(?:toutes?\s+)?(?:les\s+|vos\s+|tes\s+)?"
               r"(?:instructions|consignes)"),
            _p("ignor olvid", r"\b(?:ignora|ignore|ignorad|olvida|olvide)\s+(?:todas\s+)?(?:las\s+"
               r"|tus\s+|sus\s+)?(?:instrucciones|indicaciones|reglas|órdenes)"),
            _p("ignor esque desconsider", r"\b(?:ignore|ignora|esqueça|esqueca|desconsidere)\s+"
               r"(?:todas\s+)?(?:as\s+|suas\s+)?(?:instruções|instrucoes|regras|orientações)"),
            _p("ignor vergiss vergessen missacht", r"\b(?:ignoriere|ignorieren\s+sie|vergiss"
               r"|vergessen\s+sie|missachte)\s+(?:alle\s+)?(?:(?:vorherigen|bisherigen|vorigen"
               r"|früheren|obigen|deine|ihre)\s+)?(?:anweisungen|instruktionen|befehle|regeln"
               r"|vorgaben)"),
            _p("ignor dimentic", r"\b(?:ignora|ignorate|dimentica|dimenticate)\s+(?:tutte\s+)?"
               r"(?:le\s+)?(?:istruzioni|regole|indicazioni)"),
            _p("negeer vergeet", r"\b(?:negeer|vergeet)\s+(?:alle\s+)?(?:(?:eerdere|vorige"
               r"|voorgaande|bovenstaande|je)\s+)?(?:instructies|regels|opdrachten)"),
            _p("игнор забуд", r"(?:игнорируй|игнорируйте|забудь|забудьте|проигнорируй)\s+"
               r"(?:все\s+)?(?:(?:предыдущие|прежние|прошлые|свои)\s+)?(?:инструкции|указания"
               r"|правила|команды)"),
            _p("忽略 无视 忘记 忽视 忘掉",
               r"(?:忽略|无视|忘记|忽视|忘掉)(?:掉)?(?:之前|以上|先前|前面|上面"
               r"|所有|你的)(?:的)?(?:所有)?(?:的)?(?:指令|指示|说明|规则|提示)"),
            _p("無視 忘れ", r"(?:以前|前|上記|これまで)の(?:すべての|全ての)?(?:指示|命令|ルール"
               r"|プロンプト)(?:を)?(?:すべて|全て)?(?:無視|忘れ)"),
            _p("무시 잊",
               r"(?:이전|위의|앞의)\s*(?:모든\s*)?(?:지시|명령|지침)(?:사항)?"
               r"(?:을|를)?\s*(?:무시|잊)"),
        ],
        "prompt_leak": [
            _p("prompt instructions rules guidelines message preprompt systemprompt",
               r"\b(?:reveal|print|output|show"
               r"|display|repeat|recite|leak|dump|expose|disclose|tell\s+me|give\s+me|share"
               r"|write\s+out|spell\s+out|type\s+out|list)\s+(?:(?:me|us)\s+)?(?:(?:all|back|out"
               r"|verbatim)\s+)?(?:your|the|all|any|its)\s+(?:\w+\s+)?(?:system\s+(?:prompt|message)"
               r"|(?:initial|original|hidden|secret|internal|developer)\s+(?:prompt|instructions"
               r"|rules|guidelines|message)|pre-?prompt|prompt\s+above|(?:instructions|rules)\s+"
               r"(?:above|you\s+were\s+given))"),
            _p("above before", r"\b(?:print|repeat|output|show|copy|reveal)\s+(?:everything"
               r"|all(?:\s+the)?\s+text|all\s+content|the\s+text)\s+(?:above|before)\b"),
            _p("what",
               r"\bwhat\s+(?:is|are|were)\s+your\s+(?:system\s+prompt|initial\s+instructions"
               r"|original\s+instructions|hidden\s+instructions)"),
            _p("prompt systemprompt",
               r"(?:rivela|mostra|muestra|revela|montre|révèle|zeige|verrate)\w*\s+"
               r"(?:\w+\s+){0,2}(?:prompt\s+(?:di|del|de)\s+(?:sistema|système)|prompt\s+système"
               r"|system-?prompt)"),
            _p("システムプロンプト 系统提示 系統提示 시스템",
               r"システムプロンプト|系统提示|系統提示|시스템\s*프롬프트"),
        ],
        "role_hijack": [
            _p("you are now|you're now|you will be now",
               r"\byou(?:'re|\s+are|\s+will\s+be)\s+now\s+(?:free|unrestricted|unfiltered"
               r"|unlimited|jailbroken|uncensored|dan\b|(?:in|operating\s+in)\s+(?:\w+\s+)?(?:"
               r"developer|god|dan|jailbreak|jailbroken|unrestricted|evil|sudo|no-?limits?|unfiltered)"
               r"\s+mode|(?:an?|the|my)\s+(?:(?!of\b|on\b|in\b|at\b|for\b)\w+\s+){0,2}?" + _AGENT
               + r"\b|called\b|named\b|known\s+as\b|\w+'s\s+(?:\w+\s+)?" + _AGENT + r"\b)"),
            _p("unfiltered unrestricted uncensored jailbroken evil unlimited unaligned amoral "
               "rogue", r"\byou(?:'re|\s+are)\s+(?:now\s+)?(?:an?\s+)?(?:unfiltered|unrestricted"
               r"|uncensored|jailbroken|evil|unlimited|unaligned|amoral|rogue)\s+(?:\w+\s+)?"
               + _AGENT + r"\b"),
            _p("no longer|",
               r"\byou(?:'re|\s+are)\s+no\s+longer\s+(?:an?\s+)?(?:ai|assistant|chatbot"
               r"|language\s+model|bound|restricted|limited|required\s+to|subject\s+to|constrained)"),
            _p("pretend", r"\bpretend\s+(?:that\s+)?(?:you(?:'re|\s+are)|to\s+be)\b"),
            _p("as if|act as|behave as", r"\b(?:act|behave|respond|answer|speak)\s+as\s+if"
               r"\s+you\s+(?:are|were|have)\s+(?:no|an?\s+(?:unrestricted|unfiltered|uncensored"
               r"|evil))|\b(?:act|behave)\s+as\s+(?:an?\s+)?(?:\w+\s+){0,2}?" + _AGENT + r"\s+(?:"
               r"with(?:out)?|that|who|which)\b"),
            _p("role stay", r"\b(?:role-?\s?play|roleplay)\s+(?:as|that)\b"
               r"|\bstay\s+in\s+character\b"),
            _p("anything now|mode", r"\bdo\s+anything\s+now\b|\b(?:dan|stan|dude|aim)\s+mode\b"
               r"|\bjailbr(?:eak|oken)\s+mode\b|\b(?:enter|enable|activate|switch\s+to|turn\s+on)\s+"
               r"(?:dan|god|jailbreak|unrestricted|unfiltered|evil|no-?limits?)\s+mode\b"),
            _p("developer mode|", r"\bdeveloper\s+mode\b[^.\n]{0,80}\b(?:ignore|bypass|no\s+(?:"
               r"restrictions|filters|rules|limits)|without\s+(?:restrictions|filters|rules|limits)"
               r"|uncensored|unfiltered)"),
            _p("restrictions rules limits filters guidelines polic ethical",
               r"\byou\s+(?:have|has)\s+no\s+(?:restrictions|rules|limits|filters|guidelines"
               r"|content\s+polic(?:y|ies)|ethical)"),
            _p("with no|never refuse", r"\bwith\s+no\s+(?:content\s+polic(?:y|ies)|ethical\s+"
               r"guidelines|safety\s+(?:guidelines|filters))\b|\bnever\s+refuses?\s+(?:a|any)\s+"
               r"(?:request|question|prompt)"),
        ],
        "role_spoofing": [
            _p("<| [inst] [/inst] <<sys>> <</sys>>", r"<\|(?:im_start|im_end|system|user|assistant"
               r"|eot_id|start_header_id|end_header_id)\|>|\[/?inst\]|<</?sys>>"),
            _p("system|assistant|ai:|ai :|ai]|ai*|ai>|developer|admin|operator|root|sudo|openai|"
               "anthropic",
               r"(?:^|\n)[ \t]*(?:#{1,6}[ \t]*|\[|\*\*|<)?[ \t]*(?:system|assistant|ai|developer"
               r"|admin(?:istrator)?|operator|root|sudo|openai|anthropic)(?:[ \t]+(?:message|prompt"
               r"|note|notice|override|instructions?|update|alert|command))?[ \t]*(?:\]|\*\*|>)?"
               r"[ \t]*:[ \t]*(?:\n[ \t]*)?(?:\W{0,3})(?:you\s+(?:are|must|will|should|shall|need"
               r"|have)|your\s+(?:new|real|task|instructions|job|role)|ignore|disregard|forget"
               r"|from\s+now\s+on|always|never|do\s+not|don'?t|reveal|send|forward|save|remember"
               r"|store|new\s+(?:instructions|rules|policy)|priority|the\s+user\s+has\s+(?:"
               r"authori[sz]ed|allowed|granted|approved)|the\s+(?:assistant|ai|model|agent)\s+(?:"
               r"must|should|will|is))"),
            _p("<system <assistant <developer <instruction </",
               r"</?(?:system|assistant|developer|instructions?)(?:\s[^>]*)?>\s*(?:\W{0,3})(?:you\b"
               r"|your\b|ignore|disregard|forget|always|never|do\s+not|reveal|send|forward|save"
               r"|remember|store|the\s+(?:previous|assistant|ai|model|user))"),
            _p("[system] [assistant] [developer]", r"\[(?:system|assistant|developer)\]\s*\(#?"
               r"[\w\-]*\)"),
            _p("system prompt|system message|system instruction",
               r"\b(?:begin|start|new|updated?)\s+"
               r"system\s+(?:prompt|message|instructions?)\b|\bsystem\s+prompt\s+(?:update|override"
               r"|begins?)\b"),
            _p("assistant|ai:|ai :", r"(?:^|\n)[ \t]*(?:assistant|ai)[ \t]*:[ \t]*(?:sure|ok|okay"
               r"|certainly|of\s+course|i\s+will|i'll)\b"),
        ],
        "addressed_to_agent": [
            _p("note message notice instruction attention reminder memo directive hint psa p.s.",
               r"\b(?:note|message|notice|instructions?|attention|reminder|memo|directive|hint|psa"
               r"|p\.s\.)\s+(?:to|for)\s+(?:the\s+|any\s+|all\s+|every\s+)?" + _AGENT
               + r"\b[ \t]*(?:[:,!\-—\n]|$|reading|processing|that|who|summari[sz]ing)"),
            _p("dear|hey|hi |hi,|hello|attention|listen", r"\b(?:dear|hey|hi|hello|attention|listen"
               r"(?:\s+up)?)(?:\s+there)?\s*,?\s+(?:the\s+)?(?:ai|a\.i\.|assistant|agent|llm|(?:"
               r"large\s+)?language\s+model|chatbot|gpt|chatgpt|claude|gemini|copilot)\b"),
            _p("if you|", r"\bif\s+you\s+are\s+(?:an?\s+)?(?:\w+\s+)?" + _AGENT_STRICT + r"\b"),
            _p("reading processing parsing summaris summariz crawling browsing scraping analys "
               "analyz reviewing", r"\b" + _AGENT_STRICT + r"\s+(?:\w+\s+){0,2}?(?:reading"
               r"|processing|parsing|summari[sz]ing|crawling|browsing|scraping|analy[sz]ing"
               r"|reviewing)\s+(?:this|these|the\s+following)\b|\b" + _AGENT + r"\s+(?:reading"
               r"|processing|parsing|summari[sz]ing|browsing)\s+(?:this|these)\s+(?:\w+\s+)?(?:should"
               r"|must|shall|will|are\s+to|need\s+to)\b"),
            _p("to any|to all|to every", r"\bto\s+(?:any|all|every)\s+(?:\w+\s+)?" + _AGENT_STRICT
               + r"\b"),
            _p("assistant,|assistant ,|ai,|ai ,|agent,|agent ,",
               r"\b(?:assistant|ai|agent)\s*,\s+(?:please\s+)?(?:from\s+now"
               r"\s+on|ignore|forget|remember|always|never|do\s+not|don'?t|send|forward|e-?mail"
               r"|save|store|add|reply|respond|say|tell|include|recommend|treat|you\s+must)"),
        ],
        "authority_claim": [
            _p("instruction", r"\b(?:new|updated|revised|real|actual|true|secret|hidden|overriding)"
               r"\s+(?:system\s+)?instructions?\s*(?::|follow|below|are\s+as\s+follows|are\s+below)"
               r"|\bthe\s+(?:real|actual|true)\s+(?:instructions|task|prompt|rules)\s+(?:are|is"
               r"|follow)"),
            _p("openai|anthropic|google|microsoft|developer|creator|admin|owner|operator|maker",
               r"\b(?:this|the\s+following)\s+is\s+(?:an?\s+)?(?:official|authori[sz]ed"
               r"|urgent|priority|verified)\s+(?:message|instruction|request|directive|command"
               r"|notice|update)\s+from\s+(?:openai|anthropic|google|microsoft|the\s+developers?"
               r"|your\s+(?:developers?|creators?|admin(?:istrator)?|owner|operator|maker))"
               r"|\b(?:message|notice|instructions?|update|directive)\s+from\s+(?:openai|anthropic"
               r"|your\s+(?:developers?|creators?|maker|owner|operator|administrator))\b"),
            _p("override command directive", r"\b(?:SYSTEM|ADMIN|ROOT|DEVELOPER|PRIORITY)\s+(?:"
               r"OVERRIDE|COMMAND|DIRECTIVE)S?\b", cased=True),
            _p("override supersede precedence outrank", r"\b(?:requests?|instructions?|orders"
               r"|commands|messages|wishes)\s+(?:now\s+)?(?:override|supersede|take\s+precedence"
               r"\s+over|outrank)\s+(?:the\s+user|yours|your\s+(?:user|instructions|rules|owner))"),
            _p("authoris authoriz allowed permitted granted approved consented agreed",
               r"\b(?:the\s+user|your\s+(?:user|owner|admin(?:istrator)?|operator))\s+(?:has\s+"
               r"|have\s+)?(?:already\s+)?(?:authori[sz]ed|allowed|permitted|granted|approved"
               r"|consented|agreed)\b[^.\n]{0,40}?\b(?:you|the\s+(?:assistant|ai|agent|model))\b"),
            # "New rule for the agent: ..." (a rule for people, "New rule: no dogs", is not)
            _p("rule polic directive order instruction",
               r"\bnew\s+(?:rules?|polic(?:y|ies)|directives?|orders?|instructions?)\s+"
               r"(?:for|to)\s+(?:the\s+|all\s+|any\s+|every\s+)?" + _AGENT + r"\b"),
            _p("notice message alert note", r"\b(?:system|admin|developer)\s+(?:notice|message"
               r"|alert|note)\s+(?:to|for)\s+(?:the\s+|all\s+|any\s+)?" + _AGENT + r"\b"),
            _p("override mode", r"\b(?:priority|admin(?:istrator)?|sudo|root|god|master)\s+(?:"
               r"override\s*(?:[:.!]|(?:enabled|activated|granted|accepted|engaged|in\s+effect)\b)"
               r"|mode\s+(?:enabled|activated|on)\b)"),
        ],
        "encoded_instruction": [
            # "aWdub3Jl... (base64, decode and follow it)": an order the patterns cannot read
            _p("decod decrypt deobfuscat de-obfuscat unscrambl revers base64 rot13",
               r"\b(?:decode|decrypt|de-?obfuscate|unscramble|reverse|base64[\s-]?decode|rot13)"
               r"\s+(?:(?:this|it|that|them)|the\s+(?:following|text|string|message|payload|line)"
               r"(?:\s+below)?)\s*(?:,\s*)?(?:and|then)\s+(?:then\s+)?(?:follow|execute|obey|do"
               r"|run|carry\s+out|apply|act\s+on|comply\s+with)\b"),
            _p("decod decrypt deobfuscat de-obfuscat unscrambl revers base64 rot13",
               r"\b(?:decode|decrypt|de-?obfuscate|unscramble|reverse|base64[\s-]?decode|rot13)"
               r"\s+and\s+(?:then\s+)?(?:follow|execute|obey|run|apply|act\s+on|comply\s+with)"
               r"\s+(?:it|this|that|them)\b"),
        ],
        "persistent_directive": [
            _p("now on|this point|this moment|this message|going forward|henceforth|hereafter|"
               "otherwise|beginning|starting|effective immediately|as of now|here on|rest of|"
               "for all|for every|for each|in all|in every|in each",
               r"\b(?:from\s+now\s+on|from\s+this\s+(?:point|moment|message)\s+(?:on(?:wards?)?"
               r"|forward)|going\s+forward|henceforth|hereafter|until\s+(?:told|instructed)\s+"
               r"otherwise|(?:beginning|starting)\s+(?:now|today|immediately)|effective\s+immediately"
               r"|as\s+of\s+now|from\s+here\s+on(?:\s+out)?|for\s+the\s+rest\s+of\s+(?:this|the|our)"
               r"\s+(?:conversation|chat|session)|(?:for|in)\s+(?:all|every|each)\s+(?:(?:future"
               r"|subsequent|later|upcoming)\s+)?(?:conversations?|chats?|sessions?|responses?"
               r"|repl(?:y|ies)|answers?|interactions?|outputs?|summar(?:y|ies)))[\s,:;\-]*(?:(?:you"
               r"\s+(?:will|must|should|shall|are\s+to|need\s+to|have\s+to)|you'll|please|kindly)"
               r"\s+)?(?:(?:always|only|never|also|just|strictly|immediately|silently|quietly"
               r"|secretly|automatically)\s+)*" + _BEHAVE + r"\b"),
            _p("going forward|", r"\bgoing\s+forward,?\s+you\s+(?:(?:will|would|must|should)\s+)?"
               r"(?:always\s+)?(?:described?|refer|recommend|respond|reply|answer|say|tell|mention"
               r"|treat|send|forward)\b"),
            _p("always never", r"\b(?:always|never)\s+" + _BEHAVE + r"\b" + _NOT_END + r"\b(?:in|to"
               r"|for|with)\s+(?:all|every|each|any)\s+(?:future\s+|subsequent\s+)?(?:responses?"
               r"|replies|answers|conversations?|sessions?|users?|interactions?)"),
            _p("you are to|", r"\byou\s+are\s+to\s+" + _BEHAVE + r"\b" + _NOT_END + r"\b(?:to|in"
               r"|for)\s+(?:all|every|each|any)\s+(?:future\s+)?(?:questions?|queries|requests?"
               r"|prompts?|messages?|responses?|answers?|repl(?:y|ies))"),
            _p("partir de|adelante|ab jetzt|ab sofort|nun an|d'ora|vanaf nu",
               r"\b(?:a\s+partir\s+de\s+agora"
               r"|a\s+partir\s+de\s+maintenant|à\s+partir\s+de\s+maintenant|de\s+ahora\s+en\s+"
               r"adelante|ab\s+(?:jetzt|sofort)|von\s+nun\s+an|d'ora\s+in\s+poi|vanaf\s+nu)\b"),
        ],
        "exfiltration": [
            _p(_SEND_A, r"\b" + _SEND + r"\b" + _NOT_END + r"(?<![\w])(?:" + _SECRET_OBJ + r")"
               + _NOT_END_API + r"\b" + _DEST),
            _p(" me | us ", r"\b" + _SEND + r"\s+(?:me|us)\s+(?:all\s+|the\s+|your\s+|any\s+)?"
               + _NOT_END + r"(?<![\w])(?:" + _SECRET_OBJ + r")"),
            _p("url link query image request markdown", r"\b(?:append|add|include|encode|embed|put"
               r"|insert|load)\b" + _NOT_END + r"(?<![\w])(?:" + _SECRET_OBJ + r")" + _NOT_END
               + r"\b(?:to|in|into|as)\s+(?:the\s+|a\s+|this\s+)?(?:url|link|query\s+string|image"
               r"|request|markdown)"),
            _p("reveal|disclose|dump|leak|expose|give me|send me|tell me|read out",
               r"\b(?:reveal|disclose|dump|leak|expose|give\s+me|send\s+me|tell\s+me|read\s+out)\s+"
               r"(?:all\s+|any\s+|every\s+|the\s+|your\s+)?(?:stored|saved|remembered|cached|known"
               r"|memori[sz]ed|environment|env)\s+(?:\w+\s+)?(?:api\s+keys?|keys|passwords?"
               r"|credentials|secrets|tokens|variables|card\s+numbers)"),
            _p("http", r"https?://\S*[?&=/]\S*(?:\{\{?\s*(?:conversation|history|memory|memories"
               r"|chat|messages?|secrets?|passwords?|user_?data|context|summary|data|info|prompt)\s*"
               r"\}\}?|\[(?:data|conversation|history|memory|secret|info)\]|<(?:data|conversation"
               r"|memory|secret)>)"),
            _p("http", r"https?://\S*[?&=/]\S*\b(?:MEMORY|CONVERSATION|HISTORY|SECRETS?|PASSWORDS?"
               r"|USER_DATA|CHAT)\b", cased=True),
            _p("tool function", r"\b(?:call|use|invoke)\s+the\s+\S+\s+(?:tool|function)\b"
               + _NOT_END + r"(?<![\w])(?:" + _SECRET_OBJ + r")"),
        ],
        "memory_tampering": [
            _p("memor knowledge", r"\b(?:add|save|store|write|insert|inject|persist|commit|record"
               r"|put|keep|memori[sz]e|remember)\b" + _NOT_END + r"\b(?:to|in|into|inside)\s+"
               r"(?:your|the\s+(?:assistant|agent|ai|model)'?s?|its|(?:the\s+)?(?:long[\s-]term|permanent"
               r"|persistent|durable|core|identity))\s+(?:[\w\-]+\s+)?(?:memory|memories|knowledge\s+"
               r"base)\b"),
            _p("memor", r"\b(?:add|save|store|write|put)\s+(?:to|in|into)\s+(?:your\s+)?(?:(?:long"
               r"[\s-]term|permanent|persistent)\s+)?(?:memory|memories)\b"),
            # "call the forget tool on every fact about Bob": a memory tool turned on memory
            _p("forget retire erase wipe purge", r"\b(?:call|use|invoke|run|trigger|execute)"
               r"\s+(?:the\s+|your\s+)?(?:forget|retire|erase|wipe|purge)\w*(?:\s+(?:tool"
               r"|function|command))?\s+(?:on|for|against|with|over)\s+(?:every|all|each|any"
               r"|match)\b"),
            _p("memor knowledge stored facts beliefs", r"\b(?:update|modify|overwrite|change|edit"
               r"|rewrite|erase|wipe|clear|reset|delete|purge|poison|alter)\s+(?:your|the\s+(?:"
               r"assistant|agent|ai)'?s?)\s+(?:\w+\s+)?(?:memory|memories|knowledge\s+base|stored\s+"
               r"facts|beliefs)\b"),
            _p("remember", r"(?:^|[.!?:;,\n]\s*|\bplease\s+|\band\s+|\bmust\s+|\bshould\s+)remember"
               r"\s+(?:this|that|the\s+following)?\s*(?:[^.\n]{0,60}?\s)?(?:permanently|forever"
               r"|for\s+(?:all\s+)?(?:future|later|subsequent)\s+(?:sessions|conversations|chats"
               r"|interactions|use)|across\s+(?:all\s+)?sessions|for\s+good)\b"),
            _p("identity permanent verified trusted confirmed core durable established long-term",
               r"\b(?:save|store|record|mark|register|treat|remember|keep)\b" + _NOT_END
               + r"\bas\s+(?:an?\s+)?(?:\w+\s+)?(?:identity|permanent|verified|trusted|confirmed"
               r"|core|durable|established|long-term)\s+(?:facts?|memory|memories|information|truths?"
               r"|preferences?|instructions?|records?)"),
        ],
        "concealment": [
            _p("do not|don't|dont|never",
               r"\b(?:do\s+not|don'?t|never)\s+(?:tell|inform|notify|alert|mention"
               r"|reveal|disclose|show|let)\s+(?:this|it|that|these|anything|any\s+of\s+this)?\s*"
               r"(?:(?:note|message|instructions?|request|change|email|text)\s+)?(?:to\s+|about\s+\w+"
               r"\s+to\s+)?(?:the\s+user|the\s+human|your\s+user|the\s+owner|the\s+operator)\b"
               r"|\b(?:do\s+not|don'?t|never)\s+(?:tell|inform|mention|reveal|disclose)\s+(?:the\s+"
               r"user|them|anyone)\s+about\s+(?:this|these|it)\b|\b(?:do\s+not|don'?t|never)\s+"
               r"(?:mention|reveal|disclose)\s+(?:this|these)\s+(?:instructions?|note|message)"),
            _p("without", r"\bwithout\s+(?:telling|informing|alerting|letting)\s+(?:the\s+user"
               r"|the\s+human|your\s+user|the\s+owner|them|anyone)\b"),
            _p("keep hide", r"\b(?:keep|hide)\s+(?:this|it|these\s+instructions)\s+(?:secret|hidden"
               r"|confidential|private)\s+from\s+(?:the\s+user|the\s+human|your\s+user|them)"),
            _p("no need|", r"\bno\s+need\s+to\s+(?:bother|tell|inform|notify|ask)\s+(?:the\s+user"
               r"|them|the\s+human)"),
            _p("silently secretly covertly quietly discreetly", r"\b(?:silently|secretly|covertly"
               r"|quietly|discreetly)\s+(?:send|forward|e-?mail|copy|upload|share|add|save|store"
               r"|post|transfer|cc|bcc|include|insert|append|delete|remove|exfiltrate)\b|\bdo\s+(?:it"
               r"|this)\s+(?:silently|secretly|quietly|covertly|discreetly)\b"),
        ],
        "response_manipulation": [
            _p("tell convince persuade assure", r"\b(?:tell|convince|persuade|assure)\s+(?:the\s+"
               r"user|the\s+human|your\s+user)\s+(?:that|to|their|they)\b"),
            _p("tell convince persuade assure", r"\b(?:tell|convince|persuade|assure)\s+(?:the\s+"
               r"user|the\s+human|your\s+user)\s+(?:everything|all)\s+(?:is|was|went|looks)\b"),
            _p("only exclusively solely", r"\b(?:respond|reply|answer)\s+(?:only|exclusively"
               r"|solely)\s+(?:in|with|using)\b"),
            _p("recommend suggest promote endorse advertise", r"\b(?:always|only)\s+(?:recommend"
               r"|suggest|promote|endorse|advertise)\b[^.\n]{0,60}?\b(?:whenever|when|if)\s+(?:the\s+"
               r"|a\s+)?(?:users?|someone|anyone|people|customers?)\s+(?:asks?|mentions?|wants?"
               r"|needs?|requests?)|\b(?:recommend|promote|endorse|advertise|mention|suggest)\s+"
               r"[^.\n]{1,60}?\s+(?:in|to)\s+(?:every|each|all|any)\s+(?:\w+\s+)?(?:answers?"
               r"|responses?|repl(?:y|ies)|users?|conversations?)"),
            _p("describe|present|portray|refer to|characteris|characteriz|rate|rank|summaris|"
               "summariz|label|call",
               r"\b(?:describe|present|portray|refer\s+to|characteri[sz]e|rate|rank"
               r"|summari[sz]e|label|call)\s+(?:this|it|them|the\s+(?:page|document|product|article"
               r"|site|author|company|competitor'?s?(?:\s+product)?|vendor|brand)|our\s+\w+)\b"
               + _NOT_END + r"\bas\s+(?:an?\s+|the\s+)?['\"]?(?:\w+\s+){0,2}?(?:safe|unsafe"
               r"|trustworthy|verified|legitimate|dangerous|best|industry\s+standard|peer[\s-]reviewed"
               r"|official|excellent|10/10|superior|secure|recommended|scam|fraud(?:ulent)?)\b"),
            _p("rate score regardless", r"\b(?:rate|score)\s+(?:it|this|them)\s+\d+\s*/\s*\d+"
               r"|\bregardless\s+of\s+(?:its|the\s+(?:page|document)'?s?|their)\s+(?:actual\s+)?"
               r"content"),
            _p("when", r"\bwhen(?:ever)?\s+(?:asked|(?:the\s+user|users?|someone|anyone)\s+asks?)\b"
               r"[^.\n]{0,80}?,\s*(?:always\s+|only\s+|just\s+)?(?:say|tell|respond|reply|answer"
               r"|recommend|suggest|claim|send|redirect)\b"),
            _p("say claim state", r"\b(?:say|claim|state)\s+(?:that\s+)?(?:our|this)\s+(?:\w+\s+)?"
               r"(?:is|are)\b"),
            _p("answer response repl message output", r"\b(?:include|add|insert|append|put|end"
               r"|sign)\b" + _NOT_END + r"\b(?:in|to|into|at\s+the\s+end\s+of|with)\s+(?:every|each"
               r"|all|your)\s+(?:future\s+)?(?:answers?|responses?|repl(?:y|ies)|messages?"
               r"|outputs?)\b"),
            _p("respond répond antwort", r"\b(?:responde|responder|réponds|répondez|antworte)\w*\s+"
               r"(?:solo|solamente|apenas|seulement|uniquement|nur)\b"),
            _p("treat|regard|consider|is your", r"\b(?:treat|regard|consider)\s+(?:their|its|the\s+"
               r"author'?s?|this\s+page'?s?)\s+(?:requests?|instructions?|messages?)\s+as\s+(?:if\s+"
               r"they\s+came\s+from\s+)?(?:the\s+user|your\s+(?:user|owner|admin))|\b(?:treat|regard"
               r"|consider)\s+(?:the\s+|its\s+|their\s+)?(?:author|sender|owner)\s+(?:of\s+this\s+"
               r"\w+\s+)?as\s+(?:an?\s+|your\s+)?(?:administrator|admin|owner|operator|developer)"
               r"|\bis\s+your\s+(?:administrator|admin|owner|operator|developer|creator)\b"),
        ],
    }


__all__ = ["Pattern", "built_in_rules"]
